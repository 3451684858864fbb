#!/usr/bin/env bash
# spill.sh - -T DIR (--spill): an output that falls half the buffer behind
# goes on from an unlinked temporary file in DIR, so the input and the
# other outputs run free; every byte still reaches every output, the file
# never has a name (gone at the end, after SIGTERM, after SIGKILL), the
# disk holds only the backlog (what was read back is punched out),
# --spill-max and a full disk bound it, and a bursty output goes back to
# memory once it has caught up.  (output_leaves_spill.sh: outputs that
# leave while spilling.)
. "$(dirname "$0")/lib.sh"

MiB=1048576
in=$T/in
gen_random "$in" $((12 * MiB + 321))
D=$T/spill
mkdir -p "$D"

# spilled_bytes N: output N's "spilled B bytes" from --stats in $E (0 if none).
spilled_bytes() {
	local b
	b=$(sed -n "s/^pagepipe: output $1 .*; spilled \([0-9]*\) bytes.*/\1/p" "$E")
	echo "${b:-0}"
}
# spells N: how many times output N went to its file.
spells() {
	local s
	s=$(sed -n "s/^pagepipe: output $1 .*; spilled [0-9]* bytes in \([0-9]*\) spell.*/\1/p" "$E")
	echo "${s:-0}"
}
want_dir_empty() {
	local left
	left=$(ls -A "$D")
	[ -z "$left" ] || bad "spill directory not empty: $left"
}
# spill_fd PID: the descriptor of PID's spill file (a deleted file in $D), or nothing.
spill_fd() {
	local l
	for l in /proc/"$1"/fd/*; do
		case $(readlink "$l" 2>/dev/null) in
		"$D"/*"(deleted)") basename "$l"; return ;;
		esac
	done
}
# wait_size FILE BYTES PID: until FILE holds BYTES or PID ended (at most 20 s).
wait_size() {
	local t0
	t0=$(now_ms)
	while [ "$(fsize "$1")" -lt "$2" ] && running "$3" &&
		[ $(($(now_ms) - t0)) -lt 20000 ]; do
		sleep 0.02
	done
}

# The flagship: a slow output 12 times the buffer behind does not hold the
# input back.  Without -T the producer could be at most the buffer (1 MiB)
# plus a kernel pipe ahead of the 3 MiB/s output, so it would take ~3.7 s;
# with it, it ends as soon as the data is on disk.
begin spill_slow_output_does_not_hold_back_input
t0=$(now_ms)
{ cat "$in"; now_ms >"$T/t_prod"; } |
	pp --progress=never --stats -m 1M -T "$D" -o "$T/fast" -L 3M -o "$T/slow" 2>"$E"
rc=$?
t1=$(now_ms)
want_status $rc 0
want_same "$in" "$T/fast"
want_same "$in" "$T/slow"
prod=$(($(cat "$T/t_prod" 2>/dev/null || echo "$t1") - t0))
[ "$prod" -lt 2500 ] || bad "the producer took $prod ms: held back by the slow output"
[ $((t1 - t0)) -ge 3000 ] || bad "the run took $((t1 - t0)) ms: the 3 MiB/s limit did not hold"
[ "$(spilled_bytes 2)" -ge $((3 * MiB)) ] || bad "output 2 spilled $(spilled_bytes 2) bytes, want >= 3 MiB"
want_grep '^pagepipe: [0-9]+ bytes .*, through the buffer' "$E" "the --stats path"
want_dir_empty
want_prefixed "$E"
end

# The file has no name while it is used, and what was read back goes back
# to the disk: near the end the file holds the backlog, not all that was
# spilled (12 MiB).
begin spill_file_unnamed_and_punched
rm -f "$T/slow"
probe=$T/punch_probe
head -c 65536 /dev/zero >"$probe"
if ! fallocate -p -o 0 -l 65536 "$probe" 2>/dev/null; then
	skip_case "this file system cannot punch holes"
else
	env --default-signal=PIPE "$PAGEPIPE" --progress=never -m 1M -T "$D" -o /dev/null \
		-L 4M -o "$T/slow" <"$in" 2>"$E" &
	pid=$!
	bg_track $pid
	wait_size "$T/slow" $((MiB / 2)) $pid
	fd=$(spill_fd $pid)
	[ -n "$fd" ] || bad "no deleted file of $D among pagepipe's descriptors"
	want_dir_empty
	wait_size "$T/slow" $((9 * MiB)) $pid
	if [ -n "$fd" ] && running $pid; then
		blocks=$(stat -L -c %b "/proc/$pid/fd/$fd" 2>/dev/null || echo 0)
		[ $((blocks * 512)) -lt $((6 * MiB)) ] ||
			bad "the spill file holds $((blocks * 512)) bytes with less than 4 MiB left to write"
	fi
	wait_pid $pid 30
	want_status "$WAIT_RC" 0
	want_same "$in" "$T/slow"
	want_dir_empty
fi
end

# Killed while spilling: nothing is left in the directory.
for sig in TERM KILL; do
	begin "spill_sig${sig}_leaves_nothing"
	rm -f "$T/slow"
	env --default-signal=PIPE "$PAGEPIPE" --progress=never -m 1M -T "$D" -o /dev/null \
		-L 2M -o "$T/slow" <"$in" 2>"$E" &
	pid=$!
	bg_track $pid
	wait_size "$T/slow" $((MiB / 2)) $pid
	[ -n "$(spill_fd $pid)" ] || bad "not spilling when killed"
	kill -$sig $pid
	wait_pid $pid 10 2>/dev/null # no "Killed" job notice in the log
	if [ $sig = TERM ]; then want_status "$WAIT_RC" 143; else want_status "$WAIT_RC" 137; fi
	want_dir_empty
	want_prefix "$in" "$T/slow"
	end
done

# A command that reads in bursts: it spills while asleep, catches up, goes
# back to memory (a second spell needs the first one over), and gets every
# byte in order across the switches.
begin spill_bursty_output_returns_to_memory
head -c $((4 * MiB)) "$in" >"$T/part1"
tail -c +$((4 * MiB + 1)) "$in" | head -c $((4 * MiB)) >"$T/part2"
cat "$T/part1" "$T/part2" >"$T/both"
rm -f "$T/slow"
{ cat "$T/part1"; sleep 3; cat "$T/part2"; } |
	pp --progress=never --stats -m 1M -T "$D" -o /dev/null \
		-x "sleep 0.5; dd bs=1M count=4 iflag=fullblock status=none; sleep 4.5; cat" >"$T/slow" 2>"$E"
want_status $? 0
want_same "$T/both" "$T/slow"
[ "$(spells 2)" -ge 2 ] || bad "the command spilled in $(spells 2) spell(s), want 2 or more"
want_dir_empty
end

# The progress line shows how much of an output's lag is on disk.
begin spill_progress_shows_disk
rm -f "$T/slow"
head -c $((6 * MiB)) "$in" | pp --progress=always -m 1M -T "$D" -o /dev/null -L 3M -o "$T/slow" 2>"$E"
want_status $? 0
tr '\r' '\n' <"$E" >"$E.lines"
want_grep ' o2 -[0-9.]+[KM]iB \(disk [0-9.]+[KM]iB\)' "$E.lines" "the progress line"
end

# --spill-max bounds the disk: the input waits for the output to read back.
begin spill_max_bounds_the_disk
rm -f "$T/slow"
pp --progress=never --stats -m 1M -T "$D" --spill-max=2M -o /dev/null -L 6M -o "$T/slow" \
	<"$in" 2>"$E"
want_status $? 0
want_same "$in" "$T/slow"
peak=$(sed -n 's/^pagepipe: output 2 .*, at most \([0-9.]*\)\(MiB\|KiB\) on disk$/\1 \2/p' "$E")
case $peak in
*KiB) ;;
*MiB) awk -v p="${peak% *}" 'BEGIN { exit !(p <= 2) }' || bad "at most $peak on disk, want <= 2 MiB" ;;
*) bad "no spill peak in --stats" ;;
esac
want_dir_empty
end

# A full file system under the spill directory: the spill is capped at what
# the disk held, the input waits for room, nothing is lost, and it says so.
begin spill_disk_full
mnt=$T/mnt
mkdir -p "$mnt"
trap 'umount "$mnt" 2>/dev/null; _cleanup' EXIT
if ! mount -t tmpfs -o size=1m tmpfs "$mnt" 2>/dev/null; then
	skip_case "cannot mount a tmpfs (not root?)"
else
	rm -f "$T/slow"
	pp --progress=never --stats -m 1M -T "$mnt" -o /dev/null -L 8M -o "$T/slow" <"$in" 2>"$E"
	want_status $? 0
	want_same "$in" "$T/slow"
	want_grep "^pagepipe: spill directory $mnt is full \(No space left on device\): spilling at most [0-9]+ bytes from now on\$" "$E"
	[ -z "$(ls -A "$mnt")" ] || bad "files left on the full file system"
	umount "$mnt"
fi
end

# A spill directory that cannot hold a file: the run does not start.
for bad_dir in "$T/none" "$in"; do
	begin "spill_dir_unusable_$(basename "$bad_dir")"
	pp -T "$bad_dir" -o "$T/out" <"$in" 2>"$E"
	want_status $? 1
	want_grep "^pagepipe: cannot make a spill file in $bad_dir: " "$E"
	end
done

# Option errors are usage errors.
n=0
for args in "--spill-max=1M|needs a spill directory" \
	"-T $D --spill-max=64K|is less than a block" \
	"-T $D --spill-max=1X|invalid spill size" \
	"-T|unexpected argument"; do
	n=$((n + 1))
	begin "spill_option_error_$n"
	# shellcheck disable=SC2086
	pp ${args%%|*} -o "$T/out" <"$in" 2>"$E"
	want_status $? 2
	want_grep "^pagepipe: .*${args#*|}" "$E"
	end
done

finish
