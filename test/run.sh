#!/bin/sh
# run.sh DIR - run every test program in DIR, each under a time limit, and
# print the closing line "N passed, N failed[, N skipped]".
# A program that crashes, hangs or exits non-zero without a FAIL line counts
# as one more failure, so a run that executed nothing cannot look green.
dir=${1:-build/test}
limit=${PP_TEST_TIMEOUT:-600}
pass=0; fail=0; skip=0; progs=0
for t in "$dir"/*; do
	[ -x "$t" ] || continue
	progs=$((progs + 1))
	name=$(basename "$t")
	out=$(mktemp)
	timeout -k 10 "$limit" "$t" >"$out" 2>"$out.err"
	rc=$?
	p=$(grep -c '^PASS ' "$out"); f=$(grep -c '^FAIL ' "$out"); s=$(grep -c '^SKIP ' "$out")
	pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		fail=$((fail + 1))
		echo "FAIL $name (exit status $rc$( [ $rc -eq 124 ] && echo ', timed out'))"
	fi
	if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
		sed "s/^/  $name: /" "$out"; sed "s/^/  $name: /" "$out.err" | tail -n 40
	else
		echo "ok   $name ($p cases$( [ $s -gt 0 ] && echo ", $s skipped"))"
	fi
	rm -f "$out" "$out.err"
done
if [ "$progs" -eq 0 ]; then
	echo "no test programs in $dir"; fail=$((fail + 1))
fi
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
