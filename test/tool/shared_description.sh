#!/usr/bin/env bash
# shared_description.sh - outputs that write at one position (one open
# file description given twice, `-o - -o -`; one pipe opened twice; one
# file appended to twice, `-a -o f -o f`) take turns, on every data path:
# the descriptor receives the input in segments, each segment once per
# such output in a row, before the next (issue 14, defect 2: on the tee
# path two threads spliced into one description, raced for its offset and
# lost up to 40% of the data with exit status 0).  A regular file opened
# twice without -a (`-o f -o f`) is two offsets: the file holds the input
# once, as with `tee f f`.
. "$(dirname "$0")/lib.sh"

in=$T/nums
seq 1 200000 >"$in"
sz=$(fsize "$in")
other=$T/other

# want_segments INPUT FILE N: FILE is INPUT cut in segments, each segment
# N times in a row (what the man page promises), nothing else.
want_segments() {
	local why
	why=$(perl -e '
		my ($in, $f, $n) = @ARGV;
		local $/; open(my $a, "<", $in) or die; my $I = <$a>;
		open(my $b, "<", $f) or die "$f missing\n"; my $F = <$b>;
		length($F) == $n * length($I) or die length($F) . " bytes, want " . $n * length($I) . "\n";
		my ($p, $q) = (0, 0);
		# Is $l the length of the segment at ($p, $q): its N copies
		# match and what follows starts like the rest of the input?
		my $fits = sub {
			my $l = shift;
			return 0 if $l <= 0 || $p + $l > length($I);
			for my $c (0 .. $n - 1) {
				return 0 if substr($F, $q + $c * $l, $l) ne substr($I, $p, $l);
			}
			return $p + $l == length($I) ||
			    substr($F, $q + $n * $l, 1) eq substr($I, $p + $l, 1);
		};
		while ($p < length($I)) {
			my $k = length($I) - $p; $k = 64 if $k > 64;
			# Usually: the second copy starts where the input starts again.
			my $l = $n > 1 ? index($F, substr($I, $p, $k), $q + 1) - $q : length($I) - $p;
			if (!$fits->($l)) { # short segments: try lengths in turn
				my $max = length($I) - $p; $max = 65536 if $max > 65536;
				for ($l = 1; $l <= $max; $l++) {
					next if substr($F, $q + $l, 1) ne substr($I, $p, 1);
					last if $fits->($l);
				}
				die "no segment repeated $n times at input offset $p\n" if $l > $max;
			}
			$p += $l; $q += $n * $l;
		}
		$q == length($F) or die "trailing bytes\n";
	' "$1" "$2" "$3" 2>&1) || bad "$(basename "$2"): $why"
}

# Several runs each: the race lost data in some runs only.
for path in tee buffer; do
	begin "stdout_twice_file_$path"
	opt=$([ $path = buffer ] && echo --no-splice)
	for r in 1 2 3 4 5 6 7 8; do
		# shellcheck disable=SC2086
		pp --stats $opt -o - -o - <"$in" >"$T/dbl" 2>"$E"
		want_status $? 0
		want_segments "$in" "$T/dbl" 2
		[ -z "$_why" ] || break
	done
	if [ $path = tee ]; then want_grep 'by tee\(2\)' "$E" "the --stats path"
	else want_grep 'through the buffer' "$E" "the --stats path"; fi
	end
done

begin stdout_twice_small_memory_tee
# -m 64K: one 64 KiB kernel pipe a chain, many laps, many segments.
for r in 1 2 3 4; do
	pp -m 64K -o - -o - <"$in" >"$T/dbl" 2>"$E"
	want_status $? 0
	want_segments "$in" "$T/dbl" 2
	[ -z "$_why" ] || break
done
end

begin stdout_twice_appending_buffer
# Standard output opened for appending: not a descriptor splice takes, so
# the buffer path.
: >"$T/dbl"
for r in 1 2 3 4; do
	: >"$T/dbl"
	pp --stats -o - -o - <"$in" >>"$T/dbl" 2>"$E"
	want_status $? 0
	want_segments "$in" "$T/dbl" 2
	[ -z "$_why" ] || break
done
want_grep 'through the buffer' "$E" "the --stats path"
end

begin stdout_twice_rate_limited
pp -o - -L 1G -o - <"$in" >"$T/dbl" 2>"$E"
want_status $? 0
want_segments "$in" "$T/dbl" 2
end

begin stdout_three_times_with_another_file
# The members of a share need not be next to each other; the other file
# is written on its own.
for opt in "" --no-splice; do
	rm -f "$other"
	# shellcheck disable=SC2086
	pp $opt -o - -o "$other" -o - -o - <"$in" >"$T/tri" 2>"$E"
	want_status $? 0
	want_segments "$in" "$T/tri" 3
	want_same "$in" "$other"
done
end

begin one_pipe_opened_twice
# Standard output a pipe, and /dev/stdout: two descriptions of one pipe.
for opt in "" --no-splice; do
	# shellcheck disable=SC2086
	pp $opt -o - -o /dev/stdout <"$in" 2>"$E" | cat >"$T/dbl"
	want_status "${PIPESTATUS[0]}" 0
	want_segments "$in" "$T/dbl" 2
done
end

begin trickling_input
# Segments as small as a line: each still comes twice in a row.
for i in $(seq 1 40); do echo "line $i"; sleep 0.005; done >"$T/lines"
{ for i in $(seq 1 40); do echo "line $i"; sleep 0.005; done; } |
	pp -o - -o - >"$T/dbl" 2>"$E"
want_status $? 0
want_segments "$T/lines" "$T/dbl" 2
end

begin append_same_file_twice
rm -f "$other"
pp -a -o "$other" -o "$other" <"$in" 2>"$E"
want_status $? 0
want_segments "$in" "$other" 2
end

begin same_file_twice_without_append
# Two opens, two offsets: each writes the whole input from the start.
echo "old content that is longer than nothing" >"$other"
pp -o "$other" -o "$other" <"$in" 2>"$E"
want_status $? 0
want_same "$in" "$other"
end

begin shared_reader_leaves
# Both outputs are one pipe whose reader leaves: both end (EPIPE, quietly),
# nobody waits for a turn that never comes.
for opt in "" --no-splice; do
	# shellcheck disable=SC2086
	pp $opt -o - -o - <"$in" 2>"$E" | head -c 100000 >/dev/null
	want_status "${PIPESTATUS[0]}" 0
done
want_empty "$E" "stderr"
end

begin shared_output_fails_with_other
# A shared descriptor that fails (/dev/full given twice as standard
# output) is dropped for both outputs; the third output gets every byte.
rm -f "$other"
pp -o - -o "$other" -o - <"$in" >/dev/full 2>"$E"
want_status $? 1
want_same "$in" "$other"
want_grep 'standard output: No space left on device' "$E"
end

finish
