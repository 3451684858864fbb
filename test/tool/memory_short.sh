#!/usr/bin/env bash
# memory_short.sh - running out of memory (here a ulimit -v below the
# buffer's -m) is not an input error: pagepipe says so once, holds the
# buffer under what it got, waits for the outputs to drain it and delivers
# every byte; only with nothing buffered does it fail (issue 14, defect 3).
# On the buffer path (--no-splice): the kernel paths hold no data in this
# process's memory, and a -L output's backlog alone does not take them off.
. "$(dirname "$0")/lib.sh"

MiB=1048576
in=$T/in
gen_random "$in" $((60 * MiB + 17))

# Address space for the program, its threads and about 20 MiB of buffer;
# -m 64M (the default) cannot be had.  An ASan or TSan build reserves far
# more address space than this: skip there.
VLIM=60000
# (In a bash of its own, so that its crash is not reported here.)
if ! bash -c 'ulimit -v $1; "$2" -i "$3" -o /dev/null; exit $?' _ $VLIM "$PAGEPIPE" "$in" \
	>/dev/null 2>&1; then
	can_limit=0
else
	can_limit=1
fi

begin memory_short_waits_and_delivers
if [ $can_limit = 0 ]; then
	skip_case "pagepipe does not run under ulimit -v $VLIM (a sanitizer build?)"
else
	rm -f "$T/a" "$T/b"
	(ulimit -v $VLIM; cat "$in" | pp --no-splice -o "$T/a" -L 30M -o "$T/b" 2>"$E"; exit "${PIPESTATUS[1]}")
	want_status $? 0
	want_same "$in" "$T/a"
	want_same "$in" "$T/b"
	want_grep '^pagepipe: memory is short \(Cannot allocate memory\): buffering at most [0-9]+ bytes from now on, waiting for the outputs to drain$' "$E" stderr
	[ "$(grep -c 'memory is short' "$E")" -le 1 ] || bad "said more than once: $(grep -c 'memory is short' "$E") times"
	grep -q 'standard input' "$E" && bad "blamed the input: $(grep -m1 'standard input' "$E")"
	want_prefixed "$E"
	end
fi

begin memory_short_quiet_says_nothing
if [ $can_limit = 0 ]; then
	skip_case "pagepipe does not run under ulimit -v $VLIM (a sanitizer build?)"
else
	rm -f "$T/a"
	(ulimit -v $VLIM; pp -q --no-splice -i "$in" -L 40M -o "$T/a" 2>"$E")
	want_status $? 0
	want_same "$in" "$T/a"
	want_empty "$E" stderr
	end
fi

finish
