#!/usr/bin/env bash
# watermarks.sh - -P: an output starts only once the buffer is PCT% full (or
# the input ended, or the buffer is full), and again after it ran empty;
# -p: reading resumes below PCT% (sanity: transfers complete and are exact).
. "$(dirname "$0")/lib.sh"

K=1024
gen_random "$T/a" $((256 * K)) # 256K = 25% of 1M
gen_random "$T/b" $((192 * K)) # 448K = 43.75%
gen_random "$T/c" $((192 * K)) # 640K = 62.5%
gen_random "$T/d" $((100 * K)) # +100K after the buffer ran empty
cat "$T/a" "$T/b" "$T/c" "$T/d" >"$T/all"

# feed FILE: write FILE to the fifo held open on fd 3 (bounded in time).
feed() { timeout 10 cat "$1" >&3 || bad "writing $(basename "$1") to the input fifo stalled"; }
# stable_out SECONDS: wait until the output is non-empty and has not grown
# for 0.5 s (at most SECONDS).
stable_out() {
	local t0 last=-1 n=0 f
	t0=$(now_ms)
	while [ $n -lt 10 ] && [ $(($(now_ms) - t0)) -lt $(($1 * 1000)) ]; do
		f=$(outsz)
		if [ "$f" -eq "$last" ] && [ "$f" -gt 0 ]; then n=$((n + 1)); else n=0; last=$f; fi
		sleep 0.05
	done
}
outsz() { local n; n=$(fsize "$T/out"); [ "$n" -ge 0 ] || n=0; echo "$n"; }

# start_fifo_run: pagepipe -m 1M -P 50 reading a fifo that this shell holds
# open on fd 3 (read-write: the open never blocks; closing it is the EOF).
start_fifo_run() {
	rm -f "$T/fifo" "$T/out"
	mkfifo "$T/fifo"
	E=$T/err.run$1
	"$PAGEPIPE" -m 1M -P 50 -i "$T/fifo" -o "$T/out" 2>"$E" </dev/null &
	pid=$!
	bg_track $pid
	exec 3<>"$T/fifo"
}
# end_fifo_run FILE: close the input; everything (FILE) must arrive, exit 0.
end_fifo_run() {
	exec 3>&-
	wait_pid $pid 15
	want_status $WAIT_RC 0
	want_same "$1" "$T/out"
	want_empty "$E" stderr
}

# Run 1: below the mark nothing goes out; the end of the input releases it.
start_fifo_run 1
begin start_at_50_holds_at_25pct
E=$T/err.run1
feed "$T/a"
sleep 0.7
[ "$(outsz)" -eq 0 ] || bad "output has $(outsz) bytes with 256K of -m 1M buffered"
end

begin start_at_50_holds_at_44pct
E=$T/err.run1
feed "$T/b"
sleep 0.7
[ "$(outsz)" -eq 0 ] || bad "output has $(outsz) bytes with 448K of -m 1M buffered"
end

begin start_at_50_eof_delivers_all
E=$T/err.run1
cat "$T/a" "$T/b" >"$T/ab"
end_fifo_run "$T/ab"
end

# Run 2: crossing the mark, the output writes at least everything buffered
# then (>= 512K); once the buffer ran empty it waits for the mark again.
# (Exactly how much follows depends on how the rest of the input arrives.)
start_fifo_run 2
begin start_at_50_flows_past_mark
E=$T/err.run2
feed "$T/a"
feed "$T/b"
sleep 0.5
feed "$T/c"
stable_out 10
n=$(outsz)
[ "$n" -ge $((512 * K)) ] && [ "$n" -le $((640 * K)) ] ||
	bad "output has $n bytes after the buffer passed 50% of 1M, want 512K..640K"
cmp -s -n "$n" "$T/all" "$T/out" || bad "output bytes differ"
end

begin start_at_50_waits_again_after_empty
E=$T/err.run2
n=$(outsz)
feed "$T/d"
sleep 0.7
[ "$(outsz)" -eq "$n" ] ||
	bad "output grew from $n to $(outsz) bytes with < 50% buffered after running empty"
end

begin start_at_50_eof_delivers_rest
E=$T/err.run2
end_fifo_run "$T/all"
end

# Input ends before the watermark: everything is still delivered.
begin start_at_50_short_input
head -c 100000 "$T/all" >"$T/short"
cat "$T/short" | pp -m 1M -P 50 -o "$T/o1" 2>"$E"
want_status "${PIPESTATUS[1]}" 0
want_same "$T/short" "$T/o1"
end

begin start_at_100_short_input
pp -m 1M -P 100 -i "$T/short" -o "$T/o1" -o - 2>"$E" >"$T/o2"
want_status $? 0
want_same "$T/short" "$T/o1"
want_same "$T/short" "$T/o2"
end

begin start_at_100_empty_input
pp -P 100 -o "$T/o1" </dev/null 2>"$E"
want_status $? 0
[ "$(fsize "$T/o1")" -eq 0 ] || bad "output has $(fsize "$T/o1") bytes"
end

# Input bigger than the buffer: a full buffer starts the output.
gen_random "$T/big" $((4 * 1048576 + 7))
begin start_at_100_buffer_full_starts
cat "$T/big" | pp -m 256K -P 100 -o "$T/o1" 2>"$E"
want_status "${PIPESTATUS[1]}" 0
want_same "$T/big" "$T/o1"
end

begin start_at_90_file_input
pp -m 1M -P 90 -i "$T/big" -o "$T/o1" -o "$T/o2" 2>"$E"
want_status $? 0
want_same "$T/big" "$T/o1"
want_same "$T/big" "$T/o2"
end

# -p: with a rate-limited output the buffer fills, and reading resumes at
# the low-water mark.
for p in 0 1 50 99 100; do
	begin "resume_at_${p}_exact"
	pp -m 256K -p $p -i "$T/big" -o "$T/o1" -L 16M -o "$T/o2" 2>"$E"
	want_status $? 0
	want_same "$T/big" "$T/o1"
	want_same "$T/big" "$T/o2"
	end
done

begin start_and_resume_together
cat "$T/big" | pp -m 512K -P 50 -p 25 -L 16M -o "$T/o1" -o - 2>"$E" >"$T/o2"
want_status "${PIPESTATUS[1]}" 0
want_same "$T/big" "$T/o1"
want_same "$T/big" "$T/o2"
end

finish
