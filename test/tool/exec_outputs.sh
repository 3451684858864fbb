#!/usr/bin/env bash
# exec_outputs.sh - commands as outputs (-x CMD): each command gets every
# byte on its standard input at its own pace (one that does not read yet
# holds back neither the input nor the other outputs), its exit status
# counts (a command that fails or is killed makes the exit status 1 and is
# named; a reader going away is quiet under the -nopipe modes), and it runs
# with the signals a shell would give it.  Every case runs on each data
# path: the default (kernel tee/splice when it can) and the buffer.
. "$(dirname "$0")/lib.sh"

in=$T/in
gen_random "$in" $((6 * 1048576 + 7))
sum=$(checksum "$in")

for path in default buffer; do
	opt=""
	[ $path = buffer ] && opt=--no-splice

	begin "${path}_every_command_gets_every_byte"
	rm -f "$T/c1" "$T/c2" "$T/o3"
	pp $opt -i "$in" -x "cat > $T/c1" -x "cksum > $T/c2" -o "$T/o3" 2>"$E"
	want_status $? 0
	want_same "$in" "$T/c1"
	want_same "$in" "$T/o3"
	[ "$(cut -d' ' -f1,2 <"$T/c2" 2>/dev/null)" = "$sum" ] || bad "cksum command saw $(cat "$T/c2" 2>/dev/null), want $sum"
	[ -s "$E" ] && bad "unexpected stderr"
	end

	# The slow command does not read at all until the fast one has had
	# every byte and finished: in lockstep (as pee runs its commands) the
	# fast one would wait for the slow one forever; here the buffer (-m
	# above the input's size) lets it lag.
	begin "${path}_a_command_lags_on_its_own"
	rm -f "$T/fast" "$T/slow" "$T/fast.done"
	pp $opt -m 16M -i "$in" \
		-x "i=0; while [ ! -e $T/fast.done ] && [ \$i -lt 400 ]; do sleep 0.05; i=\$((i+1)); done; cat > $T/slow" \
		-x "cat > $T/fast; touch $T/fast.done" 2>"$E"
	want_status $? 0
	want_same "$in" "$T/fast"
	want_same "$in" "$T/slow"
	end

	# No command holds another's pipe open: the second one waits for the
	# first to have seen end of file, and fails if that never comes.
	begin "${path}_commands_hold_no_other_pipe"
	rm -f "$T/a.done"
	pp $opt -i "$in" -x "cat > /dev/null; touch $T/a.done" \
		-x "cat > /dev/null; i=0; while [ ! -e $T/a.done ] && [ \$i -lt 200 ]; do sleep 0.05; i=\$((i+1)); done; [ -e $T/a.done ]" 2>"$E"
	want_status $? 0
	end

	begin "${path}_failing_command_named_others_complete"
	pp $opt -i "$in" -x 'cat > /dev/null; exit 3' -o "$T/o2" 2>"$E"
	want_status $? 1
	want_same "$in" "$T/o2"
	want_grep "^pagepipe: command 'cat > /dev/null; exit 3': exited with status 3\$" "$E" stderr
	want_prefixed "$E"
	end

	begin "${path}_killed_command_named_others_complete"
	pp $opt -i "$in" -x 'head -c 1000 > /dev/null; kill -9 $$' -o "$T/o2" 2>"$E"
	want_status $? 1
	want_same "$in" "$T/o2"
	want_grep "^pagepipe: command 'head -c 1000 > /dev/null; kill -9 [\$][\$]': killed by signal 9 [(]Killed[)]\$" "$E" stderr
	end

	begin "${path}_command_not_found"
	pp $opt -i "$in" -x 'no-such-command-pptest' -o "$T/o2" 2>"$E"
	want_status $? 1
	want_same "$in" "$T/o2"
	want_grep "exited with status 127\$" "$E" stderr
	end

	# A command that leaves early but succeeds is a reader going away.
	begin "${path}_command_leaving_early_is_quiet"
	pp $opt -i "$in" -x 'head -c 10 > /dev/null' -o "$T/o2" 2>"$E"
	want_status $? 0
	want_same "$in" "$T/o2"
	[ -s "$E" ] && bad "unexpected stderr"
	end

	begin "${path}_command_leaving_early_warn"
	pp $opt --output-error=warn -i "$in" -x 'head -c 10 > /dev/null' -o "$T/o2" 2>"$E"
	want_status $? 1
	want_same "$in" "$T/o2"
	want_grep "^pagepipe: command 'head -c 10 > /dev/null': Broken pipe\$" "$E" stderr
	end

	for mode in exit exit-nopipe; do
		begin "${path}_failing_command_${mode}_stops"
		yes 'pagepipe endless input' | head -c $((512 * 1048576)) |
			pp $opt --output-error=$mode -x 'exit 4' -o "$T/o2" 2>"$E"
		want_status "${PIPESTATUS[2]}" 1
		# (under exit the EPIPE of the command's pipe may stop the run
		# before its status is read: either names the command)
		want_grep "^pagepipe: command 'exit 4': (exited with status 4|Broken pipe)\$" "$E" stderr
		want_grep "stopping after" "$E" stderr
		[ "$(fsize "$T/o2")" -lt $((256 * 1048576)) ] || bad "the other output got $(fsize "$T/o2") bytes: not stopped"
		end
	done

	# pagepipe ignores SIGPIPE and blocks SIGINT/SIGTERM for itself; a
	# command must not inherit that (yes would say "Broken pipe").
	begin "${path}_command_has_default_signals"
	pp $opt -i "$in" -x "yes | head -c 1 > /dev/null; grep -E '^Sig(Blk|Ign)' /proc/self/status > $T/sig; cat > /dev/null" 2>"$E"
	want_status $? 0
	[ -s "$E" ] && bad "unexpected stderr"
	grep -q '^SigBlk:[[:space:]]*0*$' "$T/sig" || bad "blocked signals in the command: $(grep SigBlk "$T/sig")"
	ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' "$T/sig")
	# SIGPIPE is bit 13 (mask 0x1000), SIGINT 2 (0x2), SIGTERM 15 (0x4000).
	[ $((0x${ign:-0} & 0x5002)) -eq 0 ] || bad "ignored signals in the command: $ign"
	end

	begin "${path}_command_output_is_our_stdout"
	pp $opt -i "$in" -x 'cksum' >"$T/so" 2>"$E"
	want_status $? 0
	[ "$(cut -d' ' -f1,2 <"$T/so")" = "$sum" ] || bad "stdout $(cat "$T/so"), want $sum"
	end
done

begin rate_limit_applies_to_a_command
head -c 300000 "$in" >"$T/small"
pp -L 1M -i "$T/small" -x "cat > $T/c1" 2>"$E"
want_status $? 0
want_same "$T/small" "$T/c1"
end

begin empty_command_is_a_usage_error
pp -x '' </dev/null 2>"$E"
want_status $? 2
want_grep '^pagepipe: empty command' "$E" stderr
end

finish
