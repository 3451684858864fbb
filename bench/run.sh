#!/bin/sh
# run.sh DIR [ARGS...] - run every benchmark program in DIR (`make bench`
# calls it with build/bench), then every benchmark script bench/*.sh (this
# one excepted), passing ARGS to each, one after the other so they do not
# compete for the CPUs, each under a time limit (PP_BENCH_TIMEOUT seconds,
# default 900).  Benchmarks print reports; a missed performance target is
# not a failure, but a benchmark that exits non-zero (lost or corrupted
# data), crashes or times out is, and makes run.sh exit 1.  PP_BENCH_SCALE
# in the environment reaches them all; the scripts also get PP_BUILD, the
# build directory DIR is in (build for build/bench), to find the command
# and their helpers.  A script whose first line names bash runs under bash,
# any other under sh.
dir=${1:-build/bench}
[ $# -gt 0 ] && shift
limit=${PP_BENCH_TIMEOUT:-900}
here=$(dirname "$0")
PP_BUILD=$(dirname "$dir")
export PP_BUILD
args=$*
progs=0; scripts=0; bad=0

# run NAME COMMAND...: one benchmark, under the time limit.
run() {
	name=$1
	shift
	echo "== $name $args"
	timeout -k 10 "$limit" "$@"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		bad=$((bad + 1))
		echo "== $name FAILED (exit status $rc$( [ $rc -eq 124 ] && echo ', timed out'))"
	fi
	echo
}

for b in "$dir"/*; do
	[ -f "$b" ] && [ -x "$b" ] || continue
	progs=$((progs + 1))
	run "$(basename "$b")" "$b" "$@"
done
for s in "$here"/*.sh; do
	[ -f "$s" ] || continue
	[ "$(basename "$s")" = run.sh ] && continue
	scripts=$((scripts + 1))
	case $(head -n 1 "$s") in
	*bash*) shell='bash' ;;
	*) shell='sh' ;;
	esac
	run "$(basename "$s")" "$shell" "$s" "$@"
done
if [ "$progs" -eq 0 ]; then
	echo "no benchmark programs in $dir"
	exit 1
fi
echo "$progs benchmark programs and $scripts scripts run, $bad failed"
[ "$bad" -eq 0 ]
