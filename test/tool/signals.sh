#!/usr/bin/env bash
# signals.sh - SIGINT and SIGTERM end a transfer promptly with exit status
# 130 / 143 and "pagepipe: interrupted by SIG... after N bytes"; whatever
# reached the outputs is a prefix of the input.  Whether pagepipe is busy,
# blocked reading, or blocked writing.
. "$(dirname "$0")/lib.sh"

# start ARGS...: pagepipe in the background with SIGINT/SIGTERM at their
# default actions (a non-interactive shell would have its background jobs
# ignore SIGINT); sets PID.
start() {
	env --default-signal=INT,TERM,PIPE "$PAGEPIPE" "$@" 2>"$E" </dev/null &
	PID=$!
	bg_track $PID
}
# stable FILE: wait (at most 10 s) until FILE stops growing for 0.3 s.
stable() {
	local t0 last=-2 n=0 f
	t0=$(now_ms)
	while [ $n -lt 6 ] && [ $(($(now_ms) - t0)) -lt 10000 ]; do
		f=$(fsize "$1")
		if [ "$f" -eq "$last" ]; then n=$((n + 1)); else n=0; last=$f; fi
		sleep 0.05
	done
}
line='pagepipe signals test line'

for sig in INT TERM; do
	want=$((128 + $(kill -l $sig)))

	begin "sig${sig,,}_busy_endless_input"
	rm -f "$T/src" "$T/o1" "$T/o2"
	mkfifo "$T/src"
	yes "$line" >"$T/src" 2>/dev/null &
	yp=$!
	bg_track $yp
	start -m 1M -i "$T/src" -L 32M -o "$T/o1" -L 8M -o "$T/o2"
	sleep 0.8
	running $PID || bad "pagepipe ended before the signal"
	kill -$sig $PID
	wait_pid $PID 10
	kill $yp 2>/dev/null
	want_status $WAIT_RC $want
	want_grep "^pagepipe: interrupted by SIG$sig after [0-9]+ bytes\$" "$E" stderr
	want_prefixed "$E"
	n1=$(fsize "$T/o1"); n2=$(fsize "$T/o2")
	[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || bad "outputs got $n1 and $n2 bytes before the signal"
	max=$n1; [ "$n2" -le "$max" ] || max=$n2
	yes "$line" | head -c "$max" >"$T/want"
	want_prefix "$T/want" "$T/o1"
	want_prefix "$T/want" "$T/o2"
	end

	begin "sig${sig,,}_blocked_reading"
	rm -f "$T/src" "$T/o1"
	mkfifo "$T/src"
	gen_random "$T/part" 100000
	(head -c 100000 "$T/part"; exec sleep 60) >"$T/src" &
	sp=$!
	bg_track $sp
	start -i "$T/src" -o "$T/o1"
	stable "$T/o1"
	kill -$sig $PID
	wait_pid $PID 10
	kill $sp 2>/dev/null
	want_status $WAIT_RC $want
	want_grep "^pagepipe: interrupted by SIG$sig after 100000 bytes\$" "$E" stderr
	want_same "$T/part" "$T/o1"
	end

	[ -e "$T/in8" ] || gen_random "$T/in8" $((8 * 1048576))
	for nout in 1 2; do
		begin "sig${sig,,}_blocked_writing_${nout}_output$([ $nout -gt 1 ] && echo s)"
		rm -f "$T/dst" "$T/o1"
		mkfifo "$T/dst"
		(exec sleep 60) <"$T/dst" &
		rp=$!
		bg_track $rp
		if [ $nout -eq 1 ]; then
			start -m 1M -i "$T/in8" -o "$T/dst"
			sleep 0.5
		else
			start -i "$T/in8" -o "$T/o1" -o "$T/dst"
			stable "$T/o1"
		fi
		running $PID || bad "pagepipe ended although an output could not be written"
		kill -$sig $PID
		wait_pid $PID 10
		kill $rp 2>/dev/null
		want_status $WAIT_RC $want
		want_grep "^pagepipe: interrupted by SIG$sig after [0-9]+ bytes\$" "$E" stderr
		if [ $nout -gt 1 ]; then
			want_prefix "$T/in8" "$T/o1"
			[ "$(fsize "$T/o1")" -gt 0 ] || bad "the free output got nothing"
		fi
		end
	done
done

finish
