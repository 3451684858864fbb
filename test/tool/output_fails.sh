#!/usr/bin/env bash
# output_fails.sh - a failing output is dropped and the others go on (or all
# stop, under the exit modes); a reader going away (EPIPE) is silent under
# the -nopipe modes; when every output is gone pagepipe stops reading.
. "$(dirname "$0")/lib.sh"

in=$T/in
gen_random "$in" $((8 * 1048576 + 5))
big=$T/big
gen_random "$big" $((30 * 1048576))
yesfile() { yes 'pagepipe endless input' | head -c "$1"; }

# ENOSPC on /dev/full ---------------------------------------------------------
for mode in "" "--output-error=warn-nopipe" "--output-error=warn"; do
	begin "devfull_dropped_other_complete${mode:+_${mode#--output-error=}}"
	pp $mode -i "$in" -o /dev/full -o "$T/o2" 2>"$E"
	want_status $? 1
	want_same "$in" "$T/o2"
	want_grep '^pagepipe: /dev/full: No space left on device$' "$E" stderr
	want_prefixed "$E"
	end

	begin "devfull_dropped_message${mode:+_${mode#--output-error=}}"
	pp $mode -i "$in" -o "$T/o2" -o /dev/full 2>"$E"
	want_status $? 1
	want_same "$in" "$T/o2"
	want_grep '^pagepipe: /dev/full: output dropped after 0 bytes$' "$E" stderr
	end
done

begin devfull_as_stdout
pp -i "$in" >/dev/full 2>"$E"
want_status $? 1
want_grep '^pagepipe: standard output: No space left on device$' "$E" stderr
want_prefixed "$E"
end

begin devfull_quiet_still_reports_error
pp -q -i "$in" -o /dev/full -o "$T/o2" 2>"$E"
want_status $? 1
want_same "$in" "$T/o2"
want_grep '^pagepipe: /dev/full: No space left on device$' "$E" stderr
end

# --output-error=exit / exit-nopipe: stop at once, even on an endless input.
for mode in exit exit-nopipe; do
	# (512 MiB rather than endless, so that a pagepipe that does not stop
	# cannot fill the disk: stopping means far less than that written.)
	begin "devfull_${mode}_stops_at_once"
	rm -f "$T/o2"
	yesfile $((512 * 1048576)) | pp --output-error=$mode -o "$T/o2" -o /dev/full 2>"$E"
	want_status "${PIPESTATUS[1]}" 1
	want_grep '^pagepipe: /dev/full: No space left on device$' "$E" stderr
	want_prefixed "$E"
	[ "$(fsize "$T/o2")" -lt $((256 * 1048576)) ] || bad "the other output got $(fsize "$T/o2") bytes: not stopped"
	yesfile "$(fsize "$T/o2")" >"$T/yes.want"
	want_prefix "$T/yes.want" "$T/o2"
	end

	begin "devfull_${mode}_file_input"
	rm -f "$T/o2"
	pp --output-error=$mode -i "$big" -o /dev/full -o "$T/o2" 2>"$E"
	want_status $? 1
	want_grep '^pagepipe: /dev/full: No space left on device$' "$E" stderr
	want_prefix "$big" "$T/o2"
	end
done

begin all_outputs_fail_stops_endless_input
t0=$(now_ms)
yes 'pagepipe endless input' | pp -o /dev/full -o /dev/full 2>"$E" >"$T/o3"
want_status "${PIPESTATUS[1]}" 1
[ "$(grep -c '^pagepipe: /dev/full: No space left on device$' "$E")" -eq 2 ] ||
	bad "want two ENOSPC messages, got: $(tr '\n' '|' <"$E")"
want_empty "$T/o3" "standard output"
end

# EPIPE: a reader that goes away after 1000 bytes ------------------------------
# epipe_run MODE...: input $in to a fifo read by `head -c 1000` and to o2.
epipe_run() {
	rm -f "$T/fifo" "$T/o2"
	mkfifo "$T/fifo"
	head -c 1000 "$T/fifo" >"$T/head.out" &
	local hp=$!
	bg_track $hp
	pp "$@" -i "$in" -o "$T/fifo" -o "$T/o2" 2>"$E"
	RC=$?
	wait_pid $hp 10
	[ "$(fsize "$T/head.out")" -eq 1000 ] || bad "reader got $(fsize "$T/head.out") bytes"
	cmp -s -n 1000 "$in" "$T/head.out" || bad "reader got wrong bytes"
}
for mode in "" "--output-error" "--output-error=warn-nopipe" "--output-error=exit-nopipe"; do
	case $mode in
	"") begin epipe_silent_default ;;
	--output-error) begin epipe_silent_option_without_mode ;;
	*) begin "epipe_silent_${mode#--output-error=}" ;;
	esac
	epipe_run $mode
	want_status $RC 0
	want_same "$in" "$T/o2"
	want_empty "$E" stderr
	end
done

begin epipe_warn_reported_others_complete
epipe_run --output-error=warn
want_status $RC 1
want_same "$in" "$T/o2"
want_grep "^pagepipe: $T/fifo: Broken pipe\$" "$E" stderr
want_grep "^pagepipe: $T/fifo: output dropped after [0-9]+ bytes\$" "$E" stderr
want_prefixed "$E"
end

begin epipe_exit_stops
epipe_run --output-error=exit
want_status $RC 1
want_grep "^pagepipe: $T/fifo: Broken pipe\$" "$E" stderr
want_prefix "$in" "$T/o2"
end

begin epipe_process_substitution
rm -f "$T/o2"
pp -i "$in" -o >(head -c 1000 >/dev/null) -o "$T/o2" 2>"$E"
want_status $? 0
want_same "$in" "$T/o2"
want_empty "$E" stderr
end

# Standard output closing early, like tee -p: quiet, exit 0.
begin stdout_head_quiet
pp <"$big" 2>"$E" | head -c 1048576 >"$T/h"
want_status "${PIPESTATUS[0]}" 0
want_empty "$E" stderr
[ "$(fsize "$T/h")" -eq 1048576 ] && cmp -s -n 1048576 "$big" "$T/h" ||
	bad "head got $(fsize "$T/h") bytes or wrong ones"
end

begin stdout_head_other_output_complete
rm -f "$T/o2"
pp -i "$big" -o - -o "$T/o2" 2>"$E" | head -c 1048576 >/dev/null
want_status "${PIPESTATUS[0]}" 0
want_same "$big" "$T/o2"
want_empty "$E" stderr
end

begin stdout_head_warn_reports
pp --output-error=warn <"$big" 2>"$E" | head -c 1000 >/dev/null
want_status "${PIPESTATUS[0]}" 1
want_grep '^pagepipe: standard output: Broken pipe$' "$E" stderr
want_prefixed "$E"
end

# Every output gone: stop reading, even from an endless input.
begin endless_pipe_all_outputs_gone
yes 'pagepipe endless input' | pp 2>"$E" | head -c 1048576 >"$T/h"
st=("${PIPESTATUS[@]}")
want_status "${st[1]}" 0
want_empty "$E" stderr
yesfile 1048576 >"$T/yes.want"
want_same "$T/yes.want" "$T/h"
end

begin endless_file_all_outputs_gone
fifo_heads 5000 70000
pp -i /dev/zero -o "$T/f1" -o "$T/f2" 2>"$E"
want_status $? 0
want_empty "$E" stderr
end

begin endless_all_gone_warn
pp --output-error=warn -i /dev/zero 2>"$E" | head -c 100 >/dev/null
want_status "${PIPESTATUS[0]}" 1
want_grep '^pagepipe: standard output: Broken pipe$' "$E" stderr
end

finish
