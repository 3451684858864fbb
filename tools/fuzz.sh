#!/bin/sh
# fuzz.sh - build the libFuzzer target test/fuzz/fuzz_ops.c and run it.
#
# Usage: tools/fuzz.sh [SECONDS] [--merge]
#   SECONDS  how long to fuzz (default 60)
#   --merge  afterwards, add the inputs that found new coverage to the seed
#            corpus test/fuzz/corpus (minimized with -merge=1); without it
#            the repository is left untouched
# Environment: CLANG (default clang), FUZZ_JOBS (parallel fuzzing processes,
# default 1), FUZZ_MAX_LEN (largest input, default 4096), FUZZ_ARGS (more
# libFuzzer options), FUZZ_CFLAGS (more compiler flags, e.g.
# -fno-sanitize=pointer-overflow to fuzz past a known sanitizer finding),
# FUZZ_KEEP=1 (go on from the scratch corpus of the previous run instead of
# starting again from the seeds).
#
# The library sources are compiled straight into the fuzzer, with the same
# flags as the target: clang -fsanitize=fuzzer,address,undefined.  Everything
# goes to build-fuzz/: the binary, a scratch copy of the corpus that the run
# may grow (build-fuzz/corpus), and any crashing input
# (build-fuzz/artifacts/crash-*, timeout-*, leak-*, oom-*).  A crash, a
# violated invariant (abort), a hang or a leak makes the script exit non-zero
# and print how to replay the input, with libFuzzer or with the gcc-built
# test program build/test/fuzz_replay.
set -eu

cd "$(dirname "$0")/.."
secs=60
merge=0
for a in "$@"; do
	case $a in
	--merge) merge=1 ;;
	''|*[!0-9]*) echo "usage: $0 [SECONDS] [--merge]" >&2; exit 2 ;;
	*) secs=$a ;;
	esac
done

CLANG=${CLANG:-clang}
jobs=${FUZZ_JOBS:-1}
maxlen=${FUZZ_MAX_LEN:-4096}
out=build-fuzz
bin=$out/fuzz_ops
mkdir -p "$out/artifacts"

flags="-std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -Isrc -g -O1
       -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=all ${FUZZ_CFLAGS:-}"
echo "building $bin"
# shellcheck disable=SC2086
"$CLANG" $flags -o "$bin" src/*.c test/fuzz/fuzz_ops.c -pthread

# A scratch corpus: starts as a copy of the seeds, keeps what this run finds.
[ "${FUZZ_KEEP:-0}" = 1 ] || rm -rf "$out/corpus"
mkdir -p "$out/corpus"
if [ -d test/fuzz/corpus ] && [ -n "$(ls -A test/fuzz/corpus)" ]; then
	cp test/fuzz/corpus/* "$out/corpus/"
fi
before=$(ls "$out/artifacts" | wc -l)

echo "fuzzing for $secs s ($jobs job(s)), corpus copy in $out/corpus"
rc=0
if [ "$jobs" -gt 1 ]; then
	# shellcheck disable=SC2086
	"$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 \
		-max_len="$maxlen" -artifact_prefix="$out/artifacts/" \
		-fork="$jobs" -ignore_crashes=0 -print_final_stats=1 \
		${FUZZ_ARGS:-} "$out/corpus" || rc=$?
else
	# shellcheck disable=SC2086
	"$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 \
		-max_len="$maxlen" -artifact_prefix="$out/artifacts/" \
		-print_final_stats=1 ${FUZZ_ARGS:-} "$out/corpus" || rc=$?
fi

after=$(ls "$out/artifacts" | wc -l)
if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
	echo "fuzz.sh: FAILED (libFuzzer exit status $rc); new inputs in $out/artifacts:" >&2
	ls -t "$out/artifacts" | head -n $((after - before > 0 ? after - before : 5)) |
		sed "s|^|  $out/artifacts/|" >&2
	echo "replay one: $bin INPUT   or   make build/test/fuzz_replay &&" \
	     "build/test/fuzz_replay INPUT   (FUZZ_VERBOSE=1 prints each step)" >&2
	[ "$rc" -ne 0 ] || rc=1
	exit "$rc"
fi

if [ "$merge" -eq 1 ]; then
	echo "merging new coverage into test/fuzz/corpus"
	mkdir -p test/fuzz/corpus
	"$bin" -merge=1 -max_len="$maxlen" -timeout=20 test/fuzz/corpus "$out/corpus"
fi
echo "fuzz.sh: no crash in $secs s"
