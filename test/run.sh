#!/bin/sh
# run.sh DIR - run every test program in DIR, then every end-to-end test
# script of the pagepipe command (test/tool/*.sh, with PAGEPIPE set to the
# absolute path of DIR/../pagepipe), each under a time limit, and print the
# closing line "N passed, N failed[, N skipped]".
# A program or script that crashes, hangs or exits non-zero without a FAIL
# line counts as one more failure, so a run that executed nothing cannot
# look green; so does a missing pagepipe binary.
dir=${1:-build/test}
limit=${PP_TEST_TIMEOUT:-600}
tooldir=$(dirname "$0")/tool
pass=0; fail=0; skip=0; progs=0
failed_names=""

# run_one NAME COMMAND...: run one test, count its PASS/FAIL/SKIP lines.
run_one() {
	name=$1
	shift
	out=$(mktemp)
	t0=$(date +%s)
	timeout -k 10 "$limit" "$@" >"$out" 2>"$out.err"
	rc=$?
	secs=$(($(date +%s) - t0)) # where CI's time goes
	p=$(grep -c '^PASS ' "$out"); f=$(grep -c '^FAIL ' "$out"); s=$(grep -c '^SKIP ' "$out")
	pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		fail=$((fail + 1))
		echo "FAIL $name (exit status $rc$( [ $rc -eq 124 ] && echo ', timed out'))"
	fi
	if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
		failed_names="$failed_names $name"
		sed "s|^|  $name: |" "$out"; sed "s|^|  $name: |" "$out.err" | tail -n 40
	else
		echo "ok   $name ($p cases$( [ $s -gt 0 ] && echo ", $s skipped"), $secs s)"
	fi
	rm -f "$out" "$out.err"
}

# PP_SKIP_PROGRAMS="NAME ...": programs not run here, each counted as one
# skipped case and named, so the log still shows them (none by default).
PP_SKIP_PROGRAMS=${PP_SKIP_PROGRAMS-}
for t in "$dir"/*; do
	[ -x "$t" ] || continue
	progs=$((progs + 1))
	case " ${PP_SKIP_PROGRAMS:-} " in
	*" $(basename "$t") "*)
		echo "SKIP $(basename "$t") (PP_SKIP_PROGRAMS)"
		skip=$((skip + 1))
		continue
		;;
	esac
	run_one "$(basename "$t")" "$t"
done
if [ "$progs" -eq 0 ]; then
	echo "no test programs in $dir"; fail=$((fail + 1))
fi

# The command's end-to-end tests, against the pagepipe built beside DIR.
# PP_NO_TOOL_SCRIPTS=1 leaves them out (the valgrind runs, which would
# only repeat them on the same command).
scripts=$(ls "$tooldir"/*.sh 2>/dev/null | grep -v '/lib\.sh$')
if [ -n "$scripts" ] && [ "${PP_NO_TOOL_SCRIPTS:-0}" = 1 ]; then
	echo "(the command's end-to-end scripts are left out: PP_NO_TOOL_SCRIPTS=1)"
elif [ -n "$scripts" ]; then
	PAGEPIPE=$(cd "$dir/.." 2>/dev/null && pwd)/pagepipe
	export PAGEPIPE
	if [ ! -x "$PAGEPIPE" ]; then
		echo "FAIL pagepipe: no executable $PAGEPIPE (build it first)"
		fail=$((fail + 1))
	else
		for t in $scripts; do
			run_one "tool/$(basename "$t" .sh)" bash "$t"
		done
	fi
fi

# The failed programs again, just above the closing line: a log cut to its
# tail (CI's summary) still says which ones failed.
[ -n "$failed_names" ] && echo "failed:$failed_names"
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
