#!/usr/bin/env bash
# example_capture_procs.sh - examples/capture_procs end to end (issue 15's
# capture -> encoder + display): with a small frame count both consumers
# get every frame intact, the data is held once and the exit status is 0;
# with --kill-display-after N the display dies after N frames, the capture
# drops it on EPIPE and the encoder still gets every frame (status 0); the
# encoder's CRC of the stream is the same in every run; usage errors exit
# 2.  The example is built beside the pagepipe command ($BUILD/examples,
# a prerequisite of `make check`); PP_CAPTURE_PROCS names another binary.
. "$(dirname "$0")/lib.sh"

EXAMPLE=${PP_CAPTURE_PROCS:-$(dirname "$PAGEPIPE")/examples/capture_procs}
if [ ! -x "$EXAMPLE" ]; then
	fail "$SCRIPT" "no executable example at $EXAMPLE (make examples)"
	exit 1
fi
FRAMES=150
BYTES=$((FRAMES * 61440))

# ex ARGS...: the example under the case time limit.
ex() { timeout -k 5 "$CASE_TIMEOUT" "$EXAMPLE" "$@"; }

# want_lag WHO FILE: WHO's largest lag is at most its pipe's capacity.
want_lag() {
	local l
	l=$(sed -n "s/^$1: lag: at most \([0-9.]*\) frames ([0-9]* bytes) waiting in its pipe (capacity \([0-9.]*\) frames)\$/\1 \2/p" "$2")
	if [ -z "$l" ]; then
		bad "no lag line for $1"
	elif ! awk -v l="$l" 'BEGIN { split(l, a, " "); exit !(a[1] >= 0 && a[1] <= a[2]) }'; then
		bad "$1's lag beyond its pipe: $l"
	fi
}

# crc_of FILE: the encoder's crc32 of the stream.
crc_of() { sed -n 's/^encoder: .*, crc32 \([0-9a-f]*\);.*/\1/p' "$1"; }

begin both_consumers_get_every_frame
ex $FRAMES >"$T/out" 2>"$E"
want_status $? 0
want_grep "^encoder: $FRAMES frames, $BYTES bytes, all intact, crc32 [0-9a-f]{8}; " "$T/out"
want_grep "^display: $FRAMES frames, $BYTES bytes, all intact; " "$T/out"
want_lag encoder "$T/out"
want_lag display "$T/out"
want_grep "^capture: $FRAMES frames written once " "$T/out"
want_grep "^capture: data held once: yes \(peak [0-9]+ <= 1056\)$" "$T/out"
want_grep "^capture: the display kept its reader to the end \($FRAMES frames fanned out\)$" "$T/out"
want_grep '^capture_procs: ok: both consumers got every frame intact$' "$T/out"
grep -q 'is gone' "$T/out" && bad "a consumer was dropped: $(grep 'is gone' "$T/out")"
want_empty "$E" stderr
crc=$(crc_of "$T/out")
end

# The display kills itself (SIGKILL) after 40 frames, then at once.
for n in 40 0; do
	begin "display_killed_after_$n"
	ex $FRAMES --kill-display-after $n >"$T/out" 2>"$E"
	want_status $? 0
	want_grep "^display: $n frames, $((n * 61440)) bytes, all intact so far; killing itself now" "$T/out"
	want_grep "^capture: the display is gone \(pp_fanout: EPIPE, POLLERR on its pipe\) at frame #[0-9]+, after [0-9]+ frames fanned out to it: dropped it" "$T/out"
	want_grep "^encoder: $FRAMES frames, $BYTES bytes, all intact, crc32 " "$T/out"
	want_lag encoder "$T/out"
	want_grep "^capture: the encoder kept its reader to the end \($FRAMES frames fanned out\)$" "$T/out"
	want_grep "^capture: data held once: yes " "$T/out"
	want_grep '^capture_procs: ok: the encoder got every frame intact; the display died as asked and was dropped$' "$T/out"
	[ "$(crc_of "$T/out")" = "$crc" ] || bad "encoder crc32 $(crc_of "$T/out"), want $crc as without a kill"
	want_empty "$E" stderr
	end
done

for args in "--kill-display-after" "abc" "10 20" "-5" "--kill-display-after x"; do
	begin "usage_error_${args// /_}"
	# shellcheck disable=SC2086 # the words are the arguments
	ex $args >"$T/out" 2>"$E"
	want_status $? 2
	want_grep '^usage: capture_procs \[FRAMES\] \[--kill-display-after N\]$' "$E" stderr
	want_empty "$T/out" stdout
	end
done

finish
