#!/usr/bin/env bash
# slow_output.sh - a slow output (rate-limited, or a reader that does not
# read) falls behind alone, up to the memory limit, while the others run at
# full speed; the process's memory stays under the limit plus a constant.
. "$(dirname "$0")/lib.sh"

MiB=1048576
vm() { sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/status" 2>/dev/null; }

# 1. -o fast -L 2M -o slow, 8 MiB: fast is complete long before slow. ---------
in=$T/in8
gen_random "$in" $((8 * MiB))
begin fast_output_not_held_back
t0=$(now_ms)
"$PAGEPIPE" -i "$in" -o "$T/fast" -L 2M -o "$T/slow" 2>"$E" </dev/null &
pid=$!
bg_track $pid
tfast=""
while running $pid && [ $(($(now_ms) - t0)) -lt 20000 ]; do
	if [ "$(fsize "$T/fast")" -eq $((8 * MiB)) ]; then
		tfast=$(($(now_ms) - t0))
		slow_then=$(fsize "$T/slow")
		alive=1
		running $pid || alive=0
		break
	fi
	sleep 0.02
done
wait_pid $pid 30
tslow=$(($(now_ms) - t0))
want_status $WAIT_RC 0
want_same "$in" "$T/fast"
want_same "$in" "$T/slow"
if [ -z "$tfast" ]; then
	bad "fast output not complete while pagepipe ran (it ran ${tslow} ms)"
else
	[ "$alive" -eq 1 ] || bad "pagepipe ended as the fast output completed"
	[ "$slow_then" -le $((6 * MiB)) ] ||
		bad "slow output had $slow_then bytes when fast completed at ${tfast} ms: not rate-limited?"
	[ $((tslow - tfast)) -ge 1000 ] ||
		bad "fast complete at ${tfast} ms, slow at ${tslow} ms: want >= 1 s apart"
fi
[ "$tslow" -ge 2500 ] || bad "8 MiB at 2M/s took only ${tslow} ms"
end

# 2. -m 4M: the fast output runs ahead of a rate-limited one by about the ---
#    memory limit, never much more.
in=$T/in16
gen_random "$in" $((16 * MiB))
begin lag_bounded_by_memory_limit
rm -f "$T/fast" "$T/slow"
"$PAGEPIPE" -m 4M -i "$in" -o "$T/fast" -L 8M -o "$T/slow" 2>"$E" </dev/null &
pid=$!
bg_track $pid
t0=$(now_ms)
maxlag=0
while running $pid && [ $(($(now_ms) - t0)) -lt 20000 ]; do
	f=$(fsize "$T/fast"); s=$(fsize "$T/slow")
	[ "$s" -ge 0 ] || s=0
	lag=$((f - s))
	[ $lag -le $maxlag ] || maxlag=$lag
	sleep 0.05
done
wait_pid $pid 30
want_status $WAIT_RC 0
want_same "$in" "$T/fast"
want_same "$in" "$T/slow"
[ $maxlag -le $((6 * MiB)) ] || bad "fast output ran $maxlag bytes ahead with -m 4M"
[ $maxlag -ge $((2 * MiB)) ] || bad "fast output never more than $maxlag bytes ahead: held back by the slow one"
end

# 3. An output whose reader stops reading: input 64 MiB, -m 4M.  The input
#    is read no further than the limit plus a small slack (8 MiB in all), the
#    other output (if any) gets about 4 MiB, and the process's peak RSS
#    stays under an idle pagepipe's + 4 MiB + 24 MiB (far below 64 MiB).
begin idle_baseline
rm -f "$T/fin"
mkfifo "$T/fin"
"$PAGEPIPE" -m 4M -i "$T/fin" -o /dev/null 2>"$E" </dev/null &
pid=$!
bg_track $pid
exec 4>"$T/fin"
printf x >&4
sleep 0.5
base=$(vm $pid VmHWM)
exec 4>&-
wait_pid $pid 10
want_status $WAIT_RC 0
[ -n "$base" ] || { bad "could not read VmHWM"; base=0; }
end

in=$T/in64
gen_random "$in" $((64 * MiB))
# in_pos PID: how far PID has read the input file $in (its fd offset).
in_pos() {
	local fd
	for fd in /proc/$1/fd/*; do
		if [ "$(readlink "$fd")" = "$in" ]; then
			sed -n 's/^pos:[[:space:]]*//p' "/proc/$1/fdinfo/${fd##*/}"
			return
		fi
	done
}
# stalled NAME FASTOUT...: pagepipe -m 4M -i $in FASTOUT... -o FIFO where
# FIFO's reader opens it but reads nothing until told; check how far the
# input was read and the peak RSS, then let the reader go.
stalled() {
	local name=$1 f last stable t0 pos hwm rss alive h
	shift
	begin "$name"
	rm -f "$T/fast" "$T/slow" "$T/fifo" "$T/go"
	mkfifo "$T/fifo"
	(while [ ! -e "$T/go" ]; do sleep 0.05; done; exec cat >"$T/slow") <"$T/fifo" &
	rd=$!
	bg_track $rd
	"$PAGEPIPE" -m 4M -i "$in" "$@" -o "$T/fifo" 2>"$E" </dev/null &
	pid=$!
	bg_track $pid
	# wait until the input position stops moving for 0.5 s
	t0=$(now_ms); last=-1; stable=0
	while [ $(($(now_ms) - t0)) -lt 15000 ] && [ $stable -lt 10 ] && running $pid; do
		pos=$(in_pos $pid)
		if [ "${pos:--2}" -eq "$last" ]; then stable=$((stable + 1)); else stable=0; last=${pos:--2}; fi
		sleep 0.05
	done
	hwm=$(vm $pid VmHWM); rss=$(vm $pid VmRSS)
	f=$(fsize "$T/fast")
	alive=1; running $pid || alive=0
	touch "$T/go"
	while running $pid; do # the peak may also come while draining
		h=$(vm $pid VmHWM)
		[ -z "$h" ] || hwm=$h
		sleep 0.05
	done
	wait_pid $pid 30
	wait_pid $rd 10
	want_status $WAIT_RC 0
	want_same "$in" "$T/slow"
	[ "$alive" -eq 1 ] || bad "pagepipe ended although an output had not read"
	if [ "$last" -lt 0 ]; then
		bad "could not see the input position"
	else
		[ "$last" -ge $((1 * MiB)) ] || bad "read only $last bytes of input while an output stalled (-m 4M)"
		[ "$last" -le $((8 * MiB)) ] || bad "read $last bytes of input while an output stalled: -m 4M not respected"
	fi
	if [ $# -gt 0 ]; then
		want_same "$in" "$T/fast"
		[ "$f" -ge $((1 * MiB)) ] || bad "fast output got only $f bytes while the other stalled"
		[ "$f" -le $((8 * MiB)) ] || bad "fast output got $f bytes with -m 4M while the other stalled"
	fi
	limit_kb=$((base + (4 + 24) * 1024))
	if [ -z "$hwm" ]; then
		bad "could not read VmHWM"
	elif [ "$hwm" -gt "$limit_kb" ]; then
		bad "peak RSS ${hwm} kB (idle ${base} kB, when stalled ${rss:-?} kB) > ${limit_kb} kB"
	fi
	echo "    ($name: idle VmHWM ${base} kB, peak ${hwm:-?} kB, stalled RSS ${rss:-?} kB, input read $last, fast got $f)"
	end
}
stalled stalled_output_two_outputs -o "$T/fast"
stalled stalled_output_single_output

finish
