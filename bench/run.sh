#!/bin/sh
# run.sh DIR [ARGS...] - run every benchmark program in DIR (`make bench`
# calls it with build/bench), passing ARGS to each, one after the other so
# they do not compete for the CPUs, each under a time limit
# (PP_BENCH_TIMEOUT seconds, default 900).  Benchmarks print reports; a
# missed performance target is not a failure, but a program that exits
# non-zero (lost or corrupted data), crashes or times out is, and makes
# run.sh exit 1.  PP_BENCH_SCALE in the environment reaches the programs.
dir=${1:-build/bench}
[ $# -gt 0 ] && shift
limit=${PP_BENCH_TIMEOUT:-900}
progs=0; bad=0
for b in "$dir"/*; do
	[ -f "$b" ] && [ -x "$b" ] || continue
	progs=$((progs + 1))
	name=$(basename "$b")
	echo "== $name $*"
	timeout -k 10 "$limit" "$b" "$@"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		bad=$((bad + 1))
		echo "== $name FAILED (exit status $rc$( [ $rc -eq 124 ] && echo ', timed out'))"
	fi
	echo
done
if [ "$progs" -eq 0 ]; then
	echo "no benchmark programs in $dir"
	exit 1
fi
echo "$progs benchmark programs run, $bad failed"
[ "$bad" -eq 0 ]
