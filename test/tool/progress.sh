#!/usr/bin/env bash
# progress.sh - a live status line (carriage returns) is drawn on a
# terminal by default (auto) or with --progress, nothing on a non-terminal
# unless =always; each redraw blanks the rest of the line before; with
# --size or a regular input file it shows a percentage and the time left;
# -q suppresses it;
# --stats prints a summary with the byte count and each output's fate.
. "$(dirname "$0")/lib.sh"

MiB=1048576
in=$T/in3
gen_random "$in" $((3 * MiB))

# on_tty ARGS...: run pagepipe with stdin, stdout and stderr on a fresh
# pseudo-terminal (util-linux script); what it drew goes to $E, the exit
# status to RC.
have_script=1
if ! script -qfec true /dev/null </dev/null >/dev/null 2>&1; then
	have_script=0
fi
on_tty() {
	local cmd a
	cmd=$(printf '%q' "$PAGEPIPE")
	for a in "$@"; do cmd="$cmd $(printf '%q' "$a")"; done
	timeout -k 5 "$CASE_TIMEOUT" script -qfec "$cmd" /dev/null </dev/null >"$E" 2>&1
	RC=$?
}
# A redraw: a carriage return followed by more text on the same line (the
# terminal itself turns each newline into CR LF, which does not count).
redraws() { grep -o $'\r[^\r]' "$1" | grep -vc $'^\r$'; }

if [ $have_script -eq 1 ]; then
	begin progress_on_tty
	on_tty --progress -L 2M -i "$in" -o "$T/o1"
	want_status $RC 0
	want_same "$in" "$T/o1"
	n=$(redraws "$E")
	[ "$n" -ge 2 ] || bad "$n redraws (carriage returns) in a 1.5 s run, want >= 2"
	want_grep '%' "$E" "terminal output"
	want_grep '[0-9]' "$E" "terminal output"
	end

	# The default is auto: on a terminal, the line is drawn unasked, as pv does.
	begin progress_by_default_on_tty
	on_tty -L 2M -i "$in" -o "$T/o1"
	want_status $RC 0
	want_same "$in" "$T/o1"
	n=$(redraws "$E")
	[ "$n" -ge 2 ] || bad "$n redraws (carriage returns) in a 1.5 s run, want >= 2"
	want_grep 'ETA [0-9]+:[0-9]{2}:[0-9]{2}' "$E" "terminal output"
	end

	begin progress_never_on_tty
	on_tty --progress=never -L 3M -i "$in" -o "$T/o1"
	want_status $RC 0
	want_same "$in" "$T/o1"
	want_empty "$E" "terminal output"
	end

	begin tty_as_the_only_output
	printf 'pagepipe-tty-output-check' >"$T/word"
	on_tty -i "$T/word"
	want_status $RC 0
	want_grep '^pagepipe-tty-output-check$' "$E" "terminal output"
	grep -q 'buf' "$E" && bad "a progress line for a run over before the first tick"
	end

	begin progress_quiet_on_tty
	on_tty -q --progress -L 3M -i "$in" -o "$T/o1"
	want_status $RC 0
	want_same "$in" "$T/o1"
	want_empty "$E" "terminal output"
	end
else
	for c in progress_on_tty progress_by_default_on_tty progress_never_on_tty tty_as_the_only_output progress_quiet_on_tty; do
		skip "$c" "util-linux script(1) cannot run a pseudo-terminal here"
	done
fi

begin progress_auto_no_tty
pp --progress -L 3M -i "$in" -o "$T/o1" 2>"$E"
want_status $? 0
want_same "$in" "$T/o1"
want_empty "$E" stderr
end

begin progress_default_no_tty
pp -L 3M -i "$in" -o "$T/o1" 2>"$E"
want_status $? 0
want_same "$in" "$T/o1"
want_empty "$E" stderr
end

# Each redraw covers all of the line before it: a shorter line is padded,
# so the last one shows no stale characters ("o2 -0B   MiB").
begin progress_no_stale_characters
pp --progress=always -i "$in" -L 2M -o "$T/o1" -L 0 -o "$T/o2" 2>"$E"
want_status $? 0
want_same "$in" "$T/o1"
stale=$(tr -d '\n' <"$E" | tr '\r' '\n' | awk 'NF && length($0) < prev { print NR": "$0 } NF { prev = length($0) }')
[ -z "$stale" ] || bad "a redraw shorter than the line before it: $stale"
tr -d '\n' <"$E" | tr '\r' '\n' | tail -n 1 | grep -q 'o2 -0B *$' || bad "last line: $(tr '\r' '\n' <"$E" | tail -n 1)"
end

# With --size, or a regular file as input: a percentage and the time left.
begin progress_size_percent_eta
cat "$in" | pp --size=3M --progress=always -L 2M -o "$T/o1" 2>"$E"
want_status "${PIPESTATUS[1]}" 0
want_same "$in" "$T/o1"
want_grep '\((3[0-9]|6[0-9])%\)' "$E" "progress line"
want_grep 'ETA 0:00:0[0-9]' "$E" "progress line"
want_grep '\(100%\)' "$E" "progress line"
end

begin progress_regular_file_percent
pp --progress=always -L 2M -i "$in" -o "$T/o1" 2>"$E"
want_status $? 0
want_grep '\([0-9]+%\).*ETA' "$E" "progress line"
want_grep '\(100%\)' "$E" "progress line"
end

begin progress_no_size_no_percent
cat "$in" | pp --progress=always -L 2M -o "$T/o1" 2>"$E"
want_status "${PIPESTATUS[1]}" 0
grep -qE '\([0-9]+%\)|ETA' "$E" && bad "a percentage or ETA without a known size"
want_grep 'buf' "$E" "progress line"
end

begin progress_always_no_tty
pp --progress=always -L 3M -i "$in" -o "$T/o1" 2>"$E"
want_status $? 0
want_same "$in" "$T/o1"
[ -s "$E" ] || bad "nothing drawn on stderr"
want_grep '[0-9]' "$E" stderr
end

begin progress_to_stdout_output_not_mixed
pp --progress=always -i "$in" 2>"$E" >"$T/o1"
want_status $? 0
want_same "$in" "$T/o1"
end

begin stats_summary
pp --stats -i "$in" -o "$T/o1" -o "$T/o2" 2>"$E"
want_status $? 0
want_same "$in" "$T/o1"
want_same "$in" "$T/o2"
want_grep "$((3 * MiB))" "$E" stats
want_grep "$T/o1" "$E" stats
want_grep "$T/o2" "$E" stats
want_grep 'done' "$E" stats
end

begin stats_stdin_stdout_names
pp --stats <"$in" >"$T/o1" 2>"$E"
want_status $? 0
want_same "$in" "$T/o1"
want_grep "$((3 * MiB))" "$E" stats
want_grep 'standard output' "$E" stats
end

begin stats_dropped_output
pp --stats -i "$in" -o /dev/full -o "$T/o2" 2>"$E"
want_status $? 1
want_same "$in" "$T/o2"
want_grep 'dropped' "$E" stats
want_grep '/dev/full' "$E" stats
want_grep "$((3 * MiB))" "$E" stats
end

begin stats_empty_input
pp --stats -o "$T/o1" </dev/null 2>"$E"
want_status $? 0
want_grep '(^|[^0-9])0([^0-9]|$)' "$E" stats
end

begin stats_quiet_suppressed
pp -q --stats -i "$in" -o "$T/o1" 2>"$E"
want_status $? 0
want_same "$in" "$T/o1"
want_empty "$E" stderr
end

finish
