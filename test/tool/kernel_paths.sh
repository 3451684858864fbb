#!/usr/bin/env bash
# kernel_paths.sh - the two kernel paths (splice(2) for one output, tee(2)
# and splice(2) through a stage pipe for several) are taken exactly when
# they apply, deliver every byte to every output through many laps of
# their chains of kernel pipes, hand a trickling input on without waiting
# for a full pipe, let a slow output fall behind alone, and keep going when
# one output's reader leaves.  --stats names the path taken.
. "$(dirname "$0")/lib.sh"

MiB=1048576
in=$T/in
gen_random "$in" $((20 * MiB + 4321))

# path_is WANT ARGS...: run pagepipe --stats ARGS (outputs under $T) and
# check the summary's path.
path_is() {
	local want=$1
	shift
	pp --stats "$@" 2>"$E" >/dev/null
	want_status $? 0
	want_grep "^pagepipe: [0-9]+ bytes .*, $want\$" "$E" "the --stats path"
}

begin path_one_output_splice
path_is 'by splice\(2\)' -i "$in" -o "$T/o1"
want_same "$in" "$T/o1"
end

begin path_two_outputs_tee
path_is 'by tee\(2\) and splice\(2\)' -i "$in" -o "$T/o1" -o "$T/o2"
want_same "$in" "$T/o1"
want_same "$in" "$T/o2"
end

begin path_no_splice_buffer
path_is 'through the buffer' --no-splice -i "$in" -o "$T/o1" -o "$T/o2"
want_same "$in" "$T/o1"
end

# A rate limit is paced by the output threads of whichever path runs: it
# no longer needs the data in this process (the kernel pipes hold a slow
# output's backlog without a copy, and without the fresh pages the buffer
# would need).  One output with a limit never goes straight through,
# which would bypass the pacing.
begin path_rate_limit_kernel
path_is 'by tee\(2\) and splice\(2\)' -i "$in" -o "$T/o1" -L 1G -o "$T/o2"
want_same "$in" "$T/o1"
want_same "$in" "$T/o2"
end

begin path_rate_limit_one_output_kernel
cat "$in" | path_is 'by splice\(2\)' -L 1G -o "$T/o1"
want_same "$in" "$T/o1"
end

begin path_watermark_buffer
path_is 'through the buffer' -P 10 -i "$in" -o "$T/o1" -o "$T/o2"
want_same "$in" "$T/o2"
end

begin path_unspliceable_output_buffer
# /dev/zero takes writes but is not /dev/null: not an output splice is
# sure to take, so the buffer path.
path_is 'through the buffer' -i "$in" -o "$T/o1" -o /dev/zero
want_same "$in" "$T/o1"
end

begin path_few_descriptors_buffer
# -m 64M is 64 kernel pipes an output: 256 descriptors for two, more than
# a limit of 200 allows, so the buffer path (and the same bytes).
(ulimit -n 200 && exec "$PAGEPIPE" --stats -i "$in" -o "$T/o1" -o "$T/o2") 2>"$E"
want_status $? 0
want_grep ', through the buffer$' "$E" "the --stats path"
want_same "$in" "$T/o2"
end

# Many laps: with -m 1M each chain is one 1 MiB pipe (below 1 MiB, one
# smaller pipe), so 20 MiB goes round every chain 20 times or more.
for m in 64K 100K 1M 3M; do
	begin "laps_three_outputs_file_m$m"
	rm -f "$T/o1" "$T/o2" "$T/o3"
	pp --stats -m $m -i "$in" -o "$T/o1" -o "$T/o2" -o - >"$T/o3" 2>"$E"
	want_status $? 0
	want_grep 'by tee' "$E" "the --stats path"
	want_same "$in" "$T/o1"
	want_same "$in" "$T/o2"
	want_same "$in" "$T/o3"
	end

	begin "laps_two_outputs_pipes_m$m"
	rm -f "$T/o1" "$T/o2"
	cat "$in" | pp -m $m -o >(cat >"$T/o1") -o - 2>"$E" | cat >"$T/o2"
	st=("${PIPESTATUS[@]}")
	want_status "${st[1]}" 0
	sleep 0.2 # the process substitution's cat may still be writing
	want_same "$in" "$T/o1"
	want_same "$in" "$T/o2"
	want_empty "$E" stderr
	end
done

# One output with a pipe on one side goes straight through (input to
# output in one splice) while the output keeps up, and through the chain
# while it cannot; a reader that stalls now and then makes it switch many
# times, with producers of odd write sizes: every byte, in order.
# prod: $in as producer $src writes it ("cat", or dd with its bs=).
prod() {
	if [ "$src" = cat ]; then cat "$in"; else $src if="$in" 2>/dev/null; fi
}
# want_spliced_whole STATUS: pagepipe (status STATUS) took the splice path
# and $T/o1 holds the input.
want_spliced_whole() {
	want_status "$1" 0
	want_same "$in" "$T/o1"
	want_grep 'by splice' "$E" "the --stats path"
}

for src in "cat" "dd bs=4k" "dd bs=1000" "dd bs=100000"; do
	begin "one_output_straight_and_chain_$(echo "$src" | tr ' =' '__')"
	rm -f "$T/o1"
	prod | pp --stats -m 1M 2>"$E" | {
		for i in 1 2 3 4 5 6; do
			dd bs=64k count=24 iflag=fullblock 2>/dev/null
			sleep 0.1
		done
		cat
	} >"$T/o1"
	st=("${PIPESTATUS[@]}")
	want_spliced_whole "${st[1]}"
	end
done

# One output that is a regular file, its input a pipe: straight through
# by read(2) and write(2) (faster than splice(2) into a file here; the
# environment's PAGEPIPE_FILE_SPLICE=1 keeps splice), with producers of
# odd write sizes, some under a page: every byte, in order, either way.
for how in copy splice; do
	for src in "cat" "dd bs=512" "dd bs=4k" "dd bs=100000"; do
		begin "one_output_pipe_to_file_${how}_$(echo "$src" | tr ' =' '__')"
		rm -f "$T/o1"
		fs=
		[ $how = splice ] && fs=1
		prod | PAGEPIPE_FILE_SPLICE=$fs pp --stats -m 1M -o "$T/o1" 2>"$E"
		st=("${PIPESTATUS[@]}")
		want_spliced_whole "${st[1]}"
		end
	done
done

# The output thread never splices into the file from an empty pipe while
# the input thread writes there straight through: splice(2) stores back
# the file position it read when it started even when it moved nothing,
# so such a call overlapping a straight write rewinds the file (once in CI
# the first 128 KiB were lost, written over, exit 0; a C program racing
# the two calls loses 10-20% of 128 MiB).  The overlap is rare, the call
# is not: strace shows it.  Every splice into the file from anything but
# the input must move bytes.
for how in copy splice; do
	begin "one_output_file_position_kept_$how"
	if ! command -v strace >/dev/null; then
		skip_case "no strace"
		continue
	fi
	rm -f "$T/o1"
	fs=
	[ $how = splice ] && fs=1
	# (LeakSanitizer cannot run under ptrace: off for this run.)
	cat "$in" | PAGEPIPE_FILE_SPLICE=$fs ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		timeout -k 5 "$CASE_TIMEOUT" \
		strace -f -qq -y -e trace=splice -e signal=none -o "$T/strace" \
		"$PAGEPIPE" -m 1M -o "$T/o1" 2>"$E"
	st=("${PIPESTATUS[@]}")
	want_status "${st[1]}" 0
	want_same "$in" "$T/o1"
	grep -q "splice(0<pipe:.*, NULL, [0-9]*<$T/o1>" "$T/strace" ||
		[ $how = copy ] || bad "no straight splice into the file seen (strace's format?)"
	idle=$(grep -E "splice\([1-9][0-9]*<[^>]*>, NULL, [0-9]+<$T/o1>, .*= (0|-1 .*)\$" "$T/strace")
	[ -z "$idle" ] || bad "a splice into the file moved nothing: $(echo "$idle" | head -1)"
	end
done

# ... and the file system fills: the write that fails leaves its bytes to
# the chain, whose output meets the error again and reports it; the file
# holds a prefix of the input, as much as fitted; the exit status is 1.
mnt=$T/small
mkdir -p "$mnt"
for how in copy splice; do
	begin "one_output_pipe_to_full_file_$how"
	if ! mount -t tmpfs -o size=192k tmpfs "$mnt" 2>/dev/null; then
		skip_case "cannot mount a tmpfs (not root?)"
		continue
	fi
	fs=
	[ $how = splice ] && fs=1
	cat "$in" | PAGEPIPE_FILE_SPLICE=$fs pp --stats -m 1M -o "$mnt/o" 2>"$E"
	st=("${PIPESTATUS[@]}")
	want_status "${st[1]}" 1
	want_grep "^pagepipe: $mnt/o: No space left on device\$" "$E" stderr
	want_prefix "$in" "$mnt/o"
	[ "$(fsize "$mnt/o")" -ge $((128 * 1024)) ] || bad "only $(fsize "$mnt/o") bytes fitted"
	umount "$mnt"
	end
done

# The same with a reader that takes a few bytes and leaves: dropped, the
# rest of the input not waited for.
begin one_output_straight_reader_leaves
yes 'pagepipe endless input' | pp --stats -m 1M 2>"$E" | head -c 100000 >/dev/null
st=("${PIPESTATUS[@]}")
want_status "${st[1]}" 0
want_grep 'by splice' "$E" "the --stats path"
want_grep '^pagepipe: output 1 .*dropped: Broken pipe$' "$E" stats
end

# A trickling input: each piece reaches both outputs while the writer
# still holds the pipe open (the stage is handed on when outputs run dry,
# not only when it is full).
begin trickle_reaches_outputs_before_eof
rm -f "$T/o1" "$T/o2" "$T/fin"
mkfifo "$T/fin"
"$PAGEPIPE" --stats -i "$T/fin" -o "$T/o1" -o "$T/o2" 2>"$E" &
pid=$!
bg_track $pid
exec 5>"$T/fin"
late=""
for i in 1 2 3 4 5; do
	printf 'piece %d\n' "$i" >&5
	t0=$(now_ms)
	until [ "$(fsize "$T/o1")" -eq $((8 * i)) ] && [ "$(fsize "$T/o2")" -eq $((8 * i)) ]; do
		if [ $(($(now_ms) - t0)) -gt 3000 ]; then
			late="piece $i not in both outputs after 3 s"
			break 2
		fi
		sleep 0.01
	done
done
exec 5>&-
wait_pid $pid 10
want_status $WAIT_RC 0
[ -z "$late" ] || bad "$late"
printf 'piece %d\n' 1 2 3 4 5 >"$T/want"
want_same "$T/want" "$T/o1"
want_same "$T/want" "$T/o2"
want_grep 'by tee' "$E" "the --stats path"
end

# A reader that sleeps before reading: the other output is complete while
# it sleeps, then the sleeper gets everything.
begin slow_reader_does_not_hold_back_other
rm -f "$T/o1" "$T/o2" "$T/fifo" "$T/go"
mkfifo "$T/fifo"
(while [ ! -e "$T/go" ]; do sleep 0.05; done; exec cat >"$T/o2") <"$T/fifo" &
rd=$!
bg_track $rd
"$PAGEPIPE" --stats -i "$in" -o "$T/o1" -o "$T/fifo" 2>"$E" &
pid=$!
bg_track $pid
t0=$(now_ms)
until [ "$(fsize "$T/o1")" -eq "$(fsize "$in")" ] || [ $(($(now_ms) - t0)) -gt 10000 ]; do
	sleep 0.02
done
[ "$(fsize "$T/o1")" -eq "$(fsize "$in")" ] || bad "o1 has $(fsize "$T/o1") bytes while the other reader slept"
running $pid || bad "pagepipe ended before the sleeping reader read"
touch "$T/go"
wait_pid $pid 20
want_status $WAIT_RC 0
wait_pid $rd 10
want_same "$in" "$T/o1"
want_same "$in" "$T/o2"
want_grep 'by tee' "$E" "the --stats path"
end

# One reader leaves early through many laps (-m 1M): the other output gets
# everything and nothing waits for the gone one.
begin reader_leaves_other_complete
rm -f "$T/o2"
pp --stats -m 1M -i "$in" -o >(head -c 1000 >/dev/null) -o "$T/o2" 2>"$E"
want_status $? 0
want_same "$in" "$T/o2"
want_grep 'by tee' "$E" "the --stats path"
want_grep '^pagepipe: output 1 .*dropped: Broken pipe$' "$E" stats
end

begin all_readers_leave_endless_input
fifo_heads 5000 3000000
yes 'pagepipe endless input' | pp --stats -o "$T/f1" -o "$T/f2" 2>"$E"
st=("${PIPESTATUS[@]}")
want_status "${st[1]}" 0
want_grep 'by tee' "$E" "the --stats path"
end

# As an unprivileged user the kernel stops granting 1 MiB pipes once the
# user's pipes hold pipe-user-pages-soft (64 MiB by default): the chains,
# made as the input reaches them, stop growing and wrap early.  Two and
# three outputs of 100 MiB (one of them read by a reader that sleeps
# first, so the input waits on a wrapped chain) must still be exact.
begin unprivileged_chains_wrap_at_pipe_quota
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	skip_case "needs root and setpriv to run as nobody"
else
	U=$T/unpriv
	chmod 711 "$T" # nobody may pass through, not list
	mkdir -p "$U" && chmod 777 "$U"
	gen_random "$U/in" $((100 * MiB + 17))
	chmod 644 "$U/in"
	asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	asnobody timeout -k 5 "$CASE_TIMEOUT" "$PAGEPIPE" --stats -i "$U/in" -o "$U/a" -o "$U/b" 2>"$E"
	want_status $? 0
	want_grep 'by tee' "$E" "the --stats path"
	want_same "$U/in" "$U/a"
	want_same "$U/in" "$U/b"
	rm -f "$U/a" "$U/b" "$U/fifo" "$U/go"
	mkfifo "$U/fifo"
	chmod 666 "$U/fifo"
	(sleep 1; exec cat >"$U/c") <"$U/fifo" &
	rd=$!
	bg_track $rd
	asnobody timeout -k 5 "$CASE_TIMEOUT" "$PAGEPIPE" -i "$U/in" -o "$U/a" -o "$U/fifo" -o "$U/b" 2>>"$E"
	want_status $? 0
	wait_pid $rd 10
	want_same "$U/in" "$U/a"
	want_same "$U/in" "$U/b"
	want_same "$U/in" "$U/c"
	rm -rf "$U"
fi
end

finish
