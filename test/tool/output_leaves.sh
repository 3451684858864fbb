#!/usr/bin/env bash
# output_leaves.sh - an output that goes away while the others go on (leaves_lib.bash
# has the matrix and what each cell checks), on the buffer path as
# forced by -a (O_APPEND is not for splice), -P and -p; and the
# reproductions of issue 14 as reported.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/leaves_lib.bash"

leaves_matrix \
	"buf_append|-m 256K -a" \
	"buf_startmark|-m 256K -P 50" \
	"buf_resumemark|-m 256K -p 50"

# The reproductions of issue 14, as they were reported. --------------------
begin issue14_append_stdout_head
rm -f "$T/a"
head -c $((3 * MiB)) /dev/zero | pp -m 256K -a -o "$T/a" -o - 2>"$E" | head -c $MiB >/dev/null
st=("${PIPESTATUS[@]}")
want_status "${st[1]}" 0
head -c $((3 * MiB)) /dev/zero >"$T/zero3"
want_same "$T/zero3" "$T/a"
want_empty "$E" stderr
end

begin issue14_nosplice_slow_fifo_killed
rm -f "$T/a" "$T/f"
mkfifo "$T/f"
(head -c 1000 >/dev/null; exec sleep 1000) <"$T/f" &
slow=$!
bg_track $slow
head -c $((3 * MiB)) /dev/zero | pp -m 64K --no-splice -o "$T/a" -o "$T/f" 2>"$E" &
pid=$!
bg_track $pid
sleep 0.3
kill -KILL $slow
wait_pid $pid $RUN_LIMIT
want_status $WAIT_RC 0
want_same "$T/zero3" "$T/a"
want_empty "$E" stderr
end

finish
