#!/usr/bin/env bash
# checksums.sh - every output receives exactly the input bytes, whatever the
# size, the input kind (file, pipe, regular-file stdin, trickling pipe) and
# the number of outputs; -a appends; new files get mode 0666 & ~umask.
. "$(dirname "$0")/lib.sh"

sizes="0 1 4095 4096 4097 $((1048576 + 3)) $((30 * 1048576 + 12345))"
for n in $sizes; do
	gen_random "$T/in.$n" "$n"
done

for n in $sizes; do
	in=$T/in.$n
	rm -f "$T"/o1 "$T"/o2 "$T"/o3

	begin "file_to_one_output_$n"
	pp -i "$in" -o "$T/o1" </dev/null >"$T/o3" 2>"$E"
	want_status $? 0
	want_same "$in" "$T/o1"
	want_empty "$T/o3" "standard output"
	want_empty "$E" stderr
	end

	begin "pipe_to_one_output_$n"
	cat "$in" | pp -o "$T/o1" 2>"$E"
	want_status "${PIPESTATUS[1]}" 0
	want_same "$in" "$T/o1"
	want_empty "$E" stderr
	end

	begin "file_to_three_outputs_$n"
	pp -i "$in" -o "$T/o1" -o "$T/o2" -o - </dev/null >"$T/o3" 2>"$E"
	want_status $? 0
	want_same "$in" "$T/o1"
	want_same "$in" "$T/o2"
	want_same "$in" "$T/o3"
	want_empty "$E" stderr
	end

	begin "pipe_to_three_outputs_$n"
	cat "$in" | pp -o "$T/o1" -o - -o "$T/o2" 2>"$E" >"$T/o3"
	want_status "${PIPESTATUS[1]}" 0
	sum=$(checksum "$in")
	want_sum "$sum" "$T/o1"
	want_sum "$sum" "$T/o2"
	want_sum "$sum" "$T/o3"
	want_same "$in" "$T/o1"
	want_same "$in" "$T/o2"
	want_same "$in" "$T/o3"
	want_empty "$E" stderr
	end

	begin "stdin_file_to_stdout_pipe_$n"
	pp <"$in" 2>"$E" | cat >"$T/o1"
	want_status "${PIPESTATUS[0]}" 0
	want_same "$in" "$T/o1"
	want_empty "$E" stderr
	end
done

# A pipe fed in many small pieces, some after a pause: partial reads.
trickle() {
	local i=0
	while [ $i -lt 3000 ]; do
		printf 'line %d of the trickle\n' $i
		if [ $((i % 500)) -eq 0 ]; then sleep 0.05; fi
		i=$((i + 1))
	done
}
trickle >"$T/trickle.want"
begin trickle_pipe_two_outputs
trickle | pp -o "$T/o1" -o "$T/o2" 2>"$E"
want_status "${PIPESTATUS[1]}" 0
want_same "$T/trickle.want" "$T/o1"
want_same "$T/trickle.want" "$T/o2"
want_empty "$E" stderr
end

begin trickle_pipe_small_blocks
trickle | pp -s 4K -m 64K -o "$T/o1" 2>"$E" >"$T/o2"
want_status "${PIPESTATUS[1]}" 0
want_same "$T/trickle.want" "$T/o1"
want_empty "$T/o2" "standard output"
end

# Small buffer, big input: the ring wraps around many times.
in=$T/in.$((1048576 + 3))
begin small_memory_many_wraps
pp -m 64K -s 4K -i "$in" -o "$T/o1" -o "$T/o2" 2>"$E"
want_status $? 0
want_same "$in" "$T/o1"
want_same "$in" "$T/o2"
end

begin big_block_size
pp -s 16M -i "$in" -o "$T/o1" 2>"$E"
want_status $? 0
want_same "$in" "$T/o1"
end

# -a appends to existing files (and creates missing ones).
in=$T/in.4097
printf 'already here\n' >"$T/a1"
rm -f "$T/a2"
cat "$T/a1" "$in" >"$T/a1.want"
begin append_mode
pp -a -i "$in" -o "$T/a1" -o "$T/a2" 2>"$E"
want_status $? 0
want_same "$T/a1.want" "$T/a1"
want_same "$in" "$T/a2"
end

begin append_mode_twice
pp --append -i "$in" -o "$T/a2" 2>"$E"
want_status $? 0
cat "$in" "$in" >"$T/a2.want"
want_same "$T/a2.want" "$T/a2"
end

# Without -a an existing, longer file is truncated.
head -c 100000 /dev/zero >"$T/t1"
begin truncate_existing_output
pp -i "$in" -o "$T/t1" 2>"$E"
want_status $? 0
want_same "$in" "$T/t1"
end

begin new_file_mode_umask
rm -f "$T/m1" "$T/m2"
(umask 022 && pp -i "$in" -o "$T/m1" 2>>"$E") || bad "status $? under umask 022"
(umask 077 && pp -i "$in" -o "$T/m2" 2>>"$E") || bad "status $? under umask 077"
[ "$(stat -c %a "$T/m1" 2>/dev/null)" = 644 ] || bad "mode $(stat -c %a "$T/m1" 2>/dev/null) under umask 022, want 644"
[ "$(stat -c %a "$T/m2" 2>/dev/null)" = 600 ] || bad "mode $(stat -c %a "$T/m2" 2>/dev/null) under umask 077, want 600"
end

# A character device as one of the outputs.
begin dev_null_and_file
pp -i "$T/in.4096" -o /dev/null -o "$T/o1" 2>"$E"
want_status $? 0
want_same "$T/in.4096" "$T/o1"
end

finish
