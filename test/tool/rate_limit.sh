#!/usr/bin/env bash
# rate_limit.sh - -L RATE limits each output to RATE bytes per second
# (positional; with no -o it applies to standard output; 0 = unlimited).
. "$(dirname "$0")/lib.sh"

MiB=1048576
gen_random "$T/in3" $((3 * MiB))
gen_random "$T/in4" $((4 * MiB))

# The lower time bounds are half the nominal time: room for a burst
# allowance, still far above an unlimited copy.
# timed CMD...: run, set RC and MS (elapsed milliseconds).
timed() {
	local t0
	t0=$(now_ms)
	"$@"
	RC=$?
	MS=$(($(now_ms) - t0))
}
# within LO HI: the elapsed time is in [LO, HI] ms.
within() {
	[ "$MS" -ge "$1" ] || bad "took ${MS} ms, want >= $1 ms"
	[ "$MS" -le "$2" ] || bad "took ${MS} ms, want <= $2 ms"
}

begin rate_1M_3MiB_file_output
timed pp -L 1M -i "$T/in3" -o "$T/o1" 2>"$E"
want_status $RC 0
want_same "$T/in3" "$T/o1"
within 1500 15000
end

begin rate_2M_3MiB_stdout_no_o
timed pp --rate=2M <"$T/in3" >"$T/o1" 2>"$E"
want_status $RC 0
want_same "$T/in3" "$T/o1"
within 750 15000
end

# The same from a pipe and into one, on every path: the kernel path (one
# output, where a pipe on either side could go straight through in one
# splice(2), bypassing the output thread that paces) and the buffer path.
for how in kernel --no-splice; do
	begin "rate_2M_3MiB_pipe_to_pipe_$how"
	opt=()
	[ "$how" = kernel ] || opt=("$how")
	t0=$(now_ms)
	cat "$T/in3" | pp "${opt[@]}" --stats -L 2M 2>"$E" | cat >"$T/o1"
	st=("${PIPESTATUS[@]}")
	MS=$(($(now_ms) - t0))
	want_status "${st[1]}" 0
	want_same "$T/in3" "$T/o1"
	# No burst here: all but the first chunk (rate/20) is paced, 1.45 s;
	# a pass straight through, unpaced, took 0.9 s.
	within 1200 15000
	if [ "$how" = kernel ]; then
		want_grep '^pagepipe: [0-9]+ bytes .*, by splice\(2\)$' "$E" "the --stats path"
	else
		want_grep '^pagepipe: [0-9]+ bytes .*, through the buffer$' "$E" "the --stats path"
	fi
	end
done

# Each output has its own limit: two outputs at 2M/s still take ~1.5 s for 3 MiB.
begin rate_2M_each_of_two_outputs
timed pp -L 2M -i "$T/in3" -o "$T/o1" -o "$T/o2" 2>"$E"
want_status $RC 0
want_same "$T/in3" "$T/o1"
want_same "$T/in3" "$T/o2"
within 750 15000
end

# -L 0 is unlimited: 4 MiB goes in well under the time of the limited runs.
begin rate_0_unlimited
timed pp -L 0 -i "$T/in4" -o "$T/o1" 2>"$E"
want_status $RC 0
want_same "$T/in4" "$T/o1"
within 0 1400
end

# Outputs named before any -L are unlimited; a later -L 0 lifts the limit
# again for the outputs after it.
begin rate_positional
rm -f "$T/o1" "$T/o2" "$T/o3"
"$PAGEPIPE" -i "$T/in4" -o "$T/o1" -L 4M -o "$T/o2" -L 0 -o "$T/o3" 2>"$E" </dev/null &
pid=$!
bg_track $pid
t0=$(now_ms)
while running $pid && [ $(($(now_ms) - t0)) -lt 20000 ]; do
	if [ "$(fsize "$T/o1")" -eq $((4 * MiB)) ] && [ "$(fsize "$T/o3")" -eq $((4 * MiB)) ]; then
		break
	fi
	sleep 0.02
done
o2=$(fsize "$T/o2")
alive=1; running $pid || alive=0
wait_pid $pid 30
MS=$(($(now_ms) - t0))
want_status $WAIT_RC 0
want_same "$T/in4" "$T/o1"
want_same "$T/in4" "$T/o2"
want_same "$T/in4" "$T/o3"
[ "$alive" -eq 1 ] && [ "$o2" -lt $((4 * MiB)) ] ||
	bad "the unlimited outputs were not complete before the limited one ($o2 bytes)"
within 500 15000
end

# SIZE syntax for the rate (no lower time bound: a burst may be allowed).
begin rate_suffix_mib
timed pp -L 8MiB -i "$T/in4" -o "$T/o1" 2>"$E"
want_status $RC 0
want_same "$T/in4" "$T/o1"
end

# A low rate paces the bytes, it does not withhold them (issue 14, defect
# 6: writes were at least a page, so -L 100 wrote nothing for 41 s and -L 1
# for an hour).  300 bytes at 100 B/s: the first ones arrive at once, all of
# them in about 3 s.  Generous bounds: outcomes, not durations.
gen_random "$T/in300" 300
begin rate_100_paces_small_writes
rm -f "$T/o1"
t0=$(now_ms)
"$PAGEPIPE" -L 100 -i "$T/in300" -o "$T/o1" 2>"$E" </dev/null &
pid=$!
bg_track $pid
first=""
while running $pid && [ $(($(now_ms) - t0)) -lt 20000 ]; do
	if [ -z "$first" ] && [ "$(fsize "$T/o1")" -gt 0 ]; then
		first=$(($(now_ms) - t0))
		at_first=$(fsize "$T/o1")
	fi
	sleep 0.02
done
wait_pid $pid 5
MS=$(($(now_ms) - t0))
want_status $WAIT_RC 0
want_same "$T/in300" "$T/o1"
if [ -z "$first" ]; then
	bad "no byte arrived while pagepipe ran (${MS} ms)"
else
	[ "$first" -lt 2000 ] || bad "the first bytes came after ${first} ms, want < 2000"
	[ "$at_first" -lt 300 ] || bad "all 300 bytes came at once: not paced"
fi
within 1000 10000
end

# -L 1: a byte a second, the first at once.
begin rate_1_first_byte_at_once
rm -f "$T/o1"
"$PAGEPIPE" -L 1 -i "$T/in300" -o "$T/o1" 2>"$E" </dev/null &
pid=$!
bg_track $pid
t0=$(now_ms)
while [ "$(fsize "$T/o1")" -le 0 ] && [ $(($(now_ms) - t0)) -lt 5000 ]; do
	sleep 0.02
done
sleep 0.5
got=$(fsize "$T/o1")
kill -TERM $pid 2>/dev/null
wait_pid $pid 10
[ "$got" -ge 1 ] && [ "$got" -le 10 ] || bad "after about 0.5 s at 1 B/s: $got bytes, want 1 to 10"
want_prefix "$T/in300" "$T/o1"
end

finish
