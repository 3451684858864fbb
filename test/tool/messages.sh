#!/usr/bin/env bash
# messages.sh - the messages name the right thing and say why (issue 14,
# defect 7): a standard descriptor closed at start is reported under its
# own name and no file takes its place (with `-o a -o - >&-`, a got the
# data twice); --help and --version to a full or closed standard output
# fail with "write error: REASON"; a thread that cannot be started is
# reported with the reason.
. "$(dirname "$0")/lib.sh"

gen_random "$T/in" 200000

for path in splice buffer; do
	extra=()
	[ $path = buffer ] && extra=(--no-splice)
	begin "stdout_closed_beside_a_file_$path"
	rm -f "$T/a"
	pp "${extra[@]}" -o "$T/a" -o - <"$T/in" >&- 2>"$E"
	want_status $? 1
	want_grep '^pagepipe: standard output: Bad file descriptor$' "$E" stderr
	grep -q "$T/a" "$E" && bad "the message blames $T/a"
	want_same "$T/in" "$T/a"
	want_prefixed "$E"
	end
done

begin stdout_closed_only_output
pp <"$T/in" >&- 2>"$E"
want_status $? 1
want_grep '^pagepipe: standard output: Bad file descriptor$' "$E" stderr
end

begin stdin_closed
rm -f "$T/a"
pp -o "$T/a" <&- 2>"$E"
want_status $? 1
want_grep '^pagepipe: standard input: Bad file descriptor$' "$E" stderr
end

begin stderr_closed_messages_stay_out_of_the_data
rm -f "$T/a"
pp -o "$T/a" -o "$T/no/such/dir/b" <"$T/in" 2>&-
want_status $? 1
want_same "$T/in" "$T/a"
end

for opt in --help --version; do
	begin "write_error${opt//-/_}_dev_full"
	pp $opt >/dev/full 2>"$E"
	want_status $? 1
	want_grep '^pagepipe: write error: No space left on device$' "$E" stderr
	end

	begin "write_error${opt//-/_}_stdout_closed"
	pp $opt >&- 2>"$E"
	want_status $? 1
	want_grep '^pagepipe: write error: Bad file descriptor$' "$E" stderr
	end
done

# With an address space of 8 MiB no thread stack (8 MiB by default) fits.
# A sanitizer build cannot even start under such a limit: skip then.
begin thread_start_failure_says_why
(ulimit -v 8000 && exec "$PAGEPIPE" -o "$T/a" <"$T/in") 2>"$T/thread.err"
rc=$?
if grep -q 'cannot start a thread' "$T/thread.err"; then
	cp "$T/thread.err" "$E"
	want_status $rc 1
	want_grep '^pagepipe: cannot start a thread: [A-Z][a-z]+' "$E" stderr
	end
else
	skip_case "no thread failure under ulimit -v 8000 (exit $rc: $(head -c 100 "$T/thread.err"))"
fi

finish
