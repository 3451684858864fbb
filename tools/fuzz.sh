#!/bin/sh
# fuzz.sh - build the libFuzzer targets and run them, one after another.
#
# Usage: tools/fuzz.sh [SECONDS] [--merge] [--target=NAME[,NAME..]]
#   SECONDS  fuzzing time in all (default 60), shared between the targets
#            by weight: ops 2, zc 2, hostile 2, opts 1 (so 17 + 17 + 17
#            + 8 s by default)
#   --merge  afterwards, add the inputs that found new coverage to each
#            target's seed corpus (minimized with -merge=1); without it the
#            repository is left untouched
#   --target only these targets (default: all there are)
# The targets:
#   ops   test/fuzz/fuzz_ops.c       corpus test/fuzz/corpus       the core calls
#   zc    test/fuzz/fuzz_zerocopy.c  corpus test/fuzz/corpus_zc    the zero-copy calls
#   hostile test/fuzz/fuzz_hostile.c corpus test/fuzz/corpus_hostile a shared
#         pipe whose control memory a misbehaving peer writes garbage over
#   opts  test/fuzz/fuzz_opts.c      corpus test/fuzz/corpus_opts  the command's
#         option parser (tools/pagepipe/opts.c); only when both files exist
# Environment: CLANG (default clang), FUZZ_JOBS (parallel fuzzing processes
# per target, default 1), FUZZ_MAX_LEN (largest input, default 4096),
# FUZZ_ARGS (more libFuzzer options), FUZZ_CFLAGS (more compiler flags, e.g.
# -fno-sanitize=pointer-overflow to fuzz past a known sanitizer finding),
# FUZZ_KEEP=1 (go on from the scratch corpora of the previous run instead of
# starting again from the seeds).
#
# Each target is compiled with the sources it tests, with the same flags:
# clang -fsanitize=fuzzer,address,undefined.  Everything goes to
# build-fuzz/: the binaries (build-fuzz/fuzz_NAME), a scratch copy of each
# corpus that the run may grow (build-fuzz/NAME/corpus), and any crashing
# input (build-fuzz/NAME/artifacts/crash-*, timeout-*, leak-*, oom-*).  A
# crash, a violated invariant (abort), a hang or a leak in any target makes
# the script exit non-zero (after running the others) and print how to replay
# the input, with libFuzzer or with the gcc-built test program
# build/test/fuzz_replay.
set -eu

cd "$(dirname "$0")/.."
secs=60
merge=0
only=
for a in "$@"; do
	case $a in
	--merge) merge=1 ;;
	--target=*) only=$(echo "${a#--target=}" | tr ',' ' ') ;;
	''|*[!0-9]*) echo "usage: $0 [SECONDS] [--merge] [--target=ops,zc,hostile,opts]" >&2; exit 2 ;;
	*) secs=$a ;;
	esac
done

CLANG=${CLANG:-clang}
jobs=${FUZZ_JOBS:-1}
maxlen=${FUZZ_MAX_LEN:-4096}
out=build-fuzz
flags="-std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -Isrc -g -O1
       -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=all ${FUZZ_CFLAGS:-}"

# NAME WEIGHT CORPUS SOURCES...
target_info() {
	case $1 in
	ops) echo "2 test/fuzz/corpus src/*.c test/fuzz/fuzz_ops.c" ;;
	zc) echo "2 test/fuzz/corpus_zc src/*.c test/fuzz/fuzz_zerocopy.c" ;;
	hostile) echo "2 test/fuzz/corpus_hostile src/*.c test/fuzz/fuzz_hostile.c" ;;
	opts) echo "1 test/fuzz/corpus_opts test/fuzz/fuzz_opts.c" ;; # it includes opts.c
	*) return 1 ;;
	esac
}

targets=
for t in ${only:-ops zc hostile opts}; do
	if ! target_info "$t" >/dev/null; then
		echo "fuzz.sh: no target $t (ops, zc, hostile, opts)" >&2
		exit 2
	fi
	if [ "$t" = opts ] && { [ ! -f tools/pagepipe/opts.c ] || [ ! -f test/fuzz/fuzz_opts.c ]; }; then
		[ -z "$only" ] || { echo "fuzz.sh: target opts needs tools/pagepipe/opts.c" >&2; exit 2; }
		continue
	fi
	targets="$targets $t"
done
total_w=0
for t in $targets; do
	# shellcheck disable=SC2046 # split into words, and expand src/*.c
	set -- $(target_info "$t")
	total_w=$((total_w + $1))
done

failed=
for t in $targets; do
	# shellcheck disable=SC2046
	set -- $(target_info "$t")
	w=$1 seeds=$2
	shift 2
	t_secs=$((secs * w / total_w))
	[ "$t_secs" -gt 0 ] || t_secs=1
	bin=$out/fuzz_$t
	dir=$out/$t
	mkdir -p "$dir/artifacts"
	echo "== $t: building $bin"
	# shellcheck disable=SC2086
	"$CLANG" $flags -o "$bin" "$@" -pthread

	# A scratch corpus: starts as a copy of the seeds, keeps what this run finds.
	[ "${FUZZ_KEEP:-0}" = 1 ] || rm -rf "$dir/corpus"
	mkdir -p "$dir/corpus"
	if [ -d "$seeds" ] && [ -n "$(ls -A "$seeds")" ]; then
		cp "$seeds"/* "$dir/corpus/"
	fi
	before=$(ls "$dir/artifacts" | wc -l)

	echo "== $t: fuzzing for $t_secs s ($jobs job(s)), corpus copy in $dir/corpus"
	rc=0
	if [ "$jobs" -gt 1 ]; then
		# shellcheck disable=SC2086
		"$bin" -max_total_time="$t_secs" -timeout=20 -rss_limit_mb=2560 \
			-max_len="$maxlen" -artifact_prefix="$dir/artifacts/" \
			-fork="$jobs" -ignore_crashes=0 -print_final_stats=1 \
			${FUZZ_ARGS:-} "$dir/corpus" || rc=$?
	else
		# shellcheck disable=SC2086
		"$bin" -max_total_time="$t_secs" -timeout=20 -rss_limit_mb=2560 \
			-max_len="$maxlen" -artifact_prefix="$dir/artifacts/" \
			-print_final_stats=1 ${FUZZ_ARGS:-} "$dir/corpus" || rc=$?
	fi

	after=$(ls "$dir/artifacts" | wc -l)
	if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
		echo "fuzz.sh: $t FAILED (libFuzzer exit status $rc); new inputs in $dir/artifacts:" >&2
		ls -t "$dir/artifacts" | head -n $((after - before > 0 ? after - before : 5)) |
			sed "s|^|  $dir/artifacts/|" >&2
		echo "replay one: $bin INPUT   or   make build/test/fuzz_replay &&" \
		     "build/test/fuzz_replay -t $t INPUT   (FUZZ_VERBOSE=1 prints each step)" >&2
		failed="$failed $t"
		continue
	fi

	if [ "$merge" -eq 1 ]; then
		echo "== $t: merging new coverage into $seeds"
		mkdir -p "$seeds"
		"$bin" -merge=1 -max_len="$maxlen" -timeout=20 "$seeds" "$dir/corpus"
	fi
	echo "== $t: no crash in $t_secs s"
done

if [ -n "$failed" ]; then
	echo "fuzz.sh: FAILED:$failed" >&2
	exit 1
fi
echo "fuzz.sh: no crash in $secs s (targets:$targets)"
