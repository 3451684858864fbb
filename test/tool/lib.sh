# lib.sh - shared helpers for the end-to-end tests of the pagepipe command.
# Sourced (bash) by every test/tool/*.sh.  The binary under test is $PAGEPIPE
# (test/run.sh sets it to DIR/../pagepipe); run alone, a script defaults to
# build/pagepipe of the source tree.
#
# A script is a list of cases:
#     begin NAME      start a case; stderr of the command under test goes to $E
#     bad "why"       record a failed check (all reasons are reported)
#     end             print "PASS NAME" or "FAIL NAME: why" (SKIP via skip_case)
# and finishes with `finish`, whose exit status is 1 if any case failed.
# Every case also fails if $E holds a sanitizer report.

set -u
export LC_ALL=C
exec </dev/null # CI runs with no standard input; nothing here may wait on it

TOOL_TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRCROOT=$(cd "$TOOL_TESTS/../.." && pwd)
: "${PAGEPIPE:=$SRCROOT/build/pagepipe}"
SCRIPT=$(basename "$0" .sh)

# A TSan build sleeps atexit_sleep_ms (1 s by default) before every exit;
# over a few hundred runs that would be minutes: keep a short pause only.
export TSAN_OPTIONS="atexit_sleep_ms=50${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

# Per-command time limit inside a case, so one hang fails one case only.
CASE_TIMEOUT=${PP_CASE_TIMEOUT:-20}

T=$(mktemp -d "${TMPDIR:-/tmp}/pptool-$SCRIPT.XXXXXX") || exit 1
_bgpids=""
_cleanup() {
	local p
	for p in $_bgpids; do
		kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap _cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

_nfail=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; _nfail=$((_nfail + 1)); }
skip() { echo "SKIP $1: $2"; }

if [ ! -x "$PAGEPIPE" ]; then
	fail "$SCRIPT" "no executable pagepipe at $PAGEPIPE"
	exit 1
fi

# --- cases --------------------------------------------------------------
_case=""; _why=""; _ncase=0
begin() {
	_case=$1; _why=""; _ncase=$((_ncase + 1))
	E=$T/err.$_ncase
	: >"$E"
}
bad() { _why="${_why:+$_why; }$(printf '%s' "$*" | tr '\n' '|')"; }
end() {
	if grep -qE 'Sanitizer|runtime error:' "$E" 2>/dev/null; then
		bad "sanitizer report: $(grep -m1 -E 'Sanitizer|runtime error:' "$E")"
	fi
	if [ -z "$_why" ]; then
		pass "$_case"
	else
		fail "$_case" "$_why"
		if [ -s "$E" ]; then # show what the command said, briefly
			head -c 600 "$E" | sed -e 's/^/    stderr: /' -e '$a\'
		fi
	fi
}
skip_case() { skip "$_case" "$1"; }
finish() { [ "$_nfail" -eq 0 ]; exit; }

# --- running the command ------------------------------------------------
# pp ARGS...: pagepipe in the foreground under the case time limit
# (status 124 when it had to be killed), with SIGPIPE at its default action
# whatever the caller inherited, so that ignoring it is pagepipe's own doing.
pp() { timeout -k 5 "$CASE_TIMEOUT" env --default-signal=PIPE "$PAGEPIPE" "$@"; }

# bg_track PID: kill PID on exit if still there.
bg_track() { _bgpids="$_bgpids $1"; }

# fifo_heads N1 N2 ...: fifos $T/f1, $T/f2, ... each read in the background
# by `head -c N` (an output whose reader leaves after N bytes).
fifo_heads() {
	local i=1 n
	for n in "$@"; do
		rm -f "$T/f$i"
		mkfifo "$T/f$i"
		head -c "$n" "$T/f$i" >/dev/null &
		bg_track $!
		i=$((i + 1))
	done
}

# wait_pid PID SECONDS: wait for a background child, at most SECONDS; sets
# WAIT_RC to its exit status, or to 124 after killing it when time ran out.
wait_pid() {
	local pid=$1 limit=$2 t0
	t0=$(now_ms)
	while running "$pid"; do
		if [ $(($(now_ms) - t0)) -ge $((limit * 1000)) ]; then
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			WAIT_RC=124
			return
		fi
		sleep 0.02
	done
	wait "$pid" 2>/dev/null
	WAIT_RC=$?
}

# running PID: true while PID runs (not a zombie).
running() { grep -q '^State:[[:space:]]*[^Z]' "/proc/$1/status" 2>/dev/null; }

# --- data and checks ----------------------------------------------------
now_ms() { echo $(($(date +%s%N) / 1000000)); }
fsize() { stat -c %s "$1" 2>/dev/null || echo -1; }
checksum() { { cksum <"$1" | cut -d' ' -f1,2; } 2>/dev/null; }
# gen_random FILE BYTES: random content (coreutils only).
gen_random() { head -c "$2" /dev/urandom >"$1"; }

# want_status GOT WANT
want_status() {
	[ "$1" -eq "$2" ] || bad "exit status $1, want $2$( [ "$1" -eq 124 ] && echo ' (timed out)')"
}
# want_same EXPECTED GOT: byte-identical files (cmp).
want_same() {
	if [ ! -e "$2" ]; then
		bad "$(basename "$2") missing"
	elif ! cmp -s "$1" "$2"; then
		bad "$(basename "$2") differs from $(basename "$1") ($(fsize "$2") bytes, want $(fsize "$1"): $(cmp "$1" "$2" 2>&1 | head -1))"
	fi
}
# want_sum CHECKSUM GOT: GOT has that checksum (see checksum).
want_sum() {
	[ "$(checksum "$2")" = "$1" ] || bad "$(basename "$2"): checksum $(checksum "$2"), want $1"
}
# want_prefix FULL GOT: GOT holds the first bytes of FULL (and no more).
want_prefix() {
	local n
	n=$(fsize "$2")
	if [ "$n" -lt 0 ]; then
		bad "$2 missing"
	elif [ "$n" -gt "$(fsize "$1")" ]; then
		bad "$(basename "$2") longer ($n) than the input"
	elif ! cmp -s -n "$n" "$1" "$2"; then
		bad "$(basename "$2") ($n bytes) is not a prefix of the input"
	fi
}
# want_grep ERE FILE [what]
want_grep() {
	grep -qE -- "$1" "$2" || bad "${3:-$(basename "$2")} lacks /$1/: $(head -c 200 "$2" | tr '\n\r' '|^')"
}
want_empty() {
	[ ! -s "$1" ] || bad "${2:-$(basename "$1")} not empty: $(head -c 200 "$1" | tr '\n\r' '|^')"
}
# want_prefixed FILE: every line of stderr starts with "pagepipe: ".
want_prefixed() {
	local l
	l=$(grep -v '^pagepipe: ' "$1" | head -1)
	[ -z "$l" ] || bad "stderr line without 'pagepipe: ': $l"
}

# free_port: a random high TCP port nothing listens on right now (another
# process may still take it before we bind: callers retry).
free_port() {
	local p hex
	while :; do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		hex=$(printf '%04X' "$p")
		grep -qiE "^ *[0-9]+: [0-9A-F]+:$hex " /proc/net/tcp /proc/net/tcp6 2>/dev/null || break
	done
	echo "$p"
}
# listening PORT: something listens on PORT (IPv4 or IPv6).
listening() {
	local hex
	hex=$(printf '%04X' "$1")
	grep -qiE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
