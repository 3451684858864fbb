#!/usr/bin/env bash
# bad_options.sh - usage errors exit 2 with "pagepipe: <what>" and the
# "Try 'pagepipe --help'" line, before any output is opened; --help and
# --version go to stdout with status 0; endpoints that cannot be opened give
# status 1 and a message naming them; valid SIZE spellings are accepted.
. "$(dirname "$0")/lib.sh"

try_line="Try 'pagepipe --help' for more information."

# usage NAME ARGS...: expect a usage error.
usage() {
	local name=$1 rc
	shift
	begin "usage_$name"
	rm -f "$T/never"
	pp -o "$T/never" "$@" </dev/null >"$T/out" 2>"$E"
	rc=$?
	want_status $rc 2
	want_empty "$T/out" "standard output"
	[ "$(head -n 1 "$E" | cut -c1-10)" = "pagepipe: " ] ||
		bad "first stderr line is not 'pagepipe: <what>': $(head -n 1 "$E")"
	[ "$(tail -n 1 "$E")" = "$try_line" ] || bad "last stderr line is not \"$try_line\": $(tail -n 1 "$E")"
	[ "$(wc -l <"$E")" -ge 2 ] || bad "want a message line and the Try line"
	[ ! -e "$T/never" ] || bad "an output was created despite the usage error"
	end
}

usage unknown_long_option --bogus
usage unknown_short_option -x
usage memory_empty -m ''
usage memory_negative -m -1
usage memory_bad_suffix -m 12X
usage memory_fraction -m 1.5M
usage memory_overflow -m 99999999999999999999999
usage memory_overflow_suffix -m 99999999999999999T
usage memory_zero -m 0
usage memory_below_64K -m 65535
usage memory_above_2G -m 3G
usage memory_2G_plus_1 -m 2147483649
usage memory_space_junk -m '64M '
usage memory_leading_space -m ' 64M'
usage memory_plus_sign -m +64M
usage memory_hex -m 0x100000
usage memory_suffix_only -m M
usage memory_double_suffix -m 64MM
usage memory_bad_b_suffix -m 64Mi
usage block_zero -s 0
usage block_below_4K -s 4095
usage block_above_16M -s 17M
usage start_at_101 -P 101
usage start_at_abc -P abc
usage start_at_negative -P -1
usage start_at_empty -P ''
usage start_at_fraction -P 50.5
usage resume_at_101 -p 101
usage resume_at_junk -p 10x
usage rate_junk -L 1Q
usage rate_negative -L -5
usage missing_argument_memory -m
usage missing_argument_input -i
usage missing_argument_rate -L
usage missing_argument_long --memory
usage output_error_bogus --output-error=bogus
usage progress_bogus --progress=sometimes
usage unexpected_operand extra-operand
usage size_zero --size=0
usage size_junk --size=3X
usage size_missing --size

# Ambiguous long-option prefixes say so, as getopt_long does, and list the
# candidates (issue 14: they were called "unrecognized").
ambiguous() {
	local name=$1 arg=$2 want=$3
	begin "ambiguous_$name"
	pp "$arg" -o "$T/never" </dev/null >"$T/out" 2>"$E"
	want_status $? 2
	want_grep "^pagepipe: option '${arg%%=*}' is ambiguous; possibilities: $want\$" "$E" stderr
	[ "$(tail -n 1 "$E")" = "$try_line" ] || bad "last stderr line: $(tail -n 1 "$E")"
	[ ! -e "$T/never" ] || bad "an output was created despite the usage error"
	end
}
ambiguous s --s "'--start-at' '--stats' '--size' '--spill' '--spill-max'"
ambiguous spil --spil=/tmp "'--spill' '--spill-max'"
ambiguous out_with_value --out=x "'--output' '--output-error'"
ambiguous st --st "'--start-at' '--stats'"

begin no_argument_option_given_one
pp --app=1 -o "$T/never" </dev/null 2>"$E"
want_status $? 2
want_grep "^pagepipe: option '--append' doesn't allow an argument\$" "$E" stderr
end

# pv's -s is the input's size; pagepipe's is the block size (as mbuffer's).
# A size past the block's range names --size; one within it (or a bad
# spelling) does not.
begin block_too_big_names_size_option
pp -s 10G </dev/null >"$T/out" 2>"$E"
want_status $? 2
want_grep "^pagepipe: block size '10G' out of range \\(4096\\.\\.16777216 bytes\\); the input's size, pv's -s, is --size=SIZE\$" "$E" stderr
pp --block=17M </dev/null >"$T/out" 2>"$E"
want_status $? 2
want_grep "pv's -s, is --size=SIZE\$" "$E" stderr
pp -s 4095 </dev/null >"$T/out" 2>"$E"
want_status $? 2
! grep -q -- '--size' "$E" || bad "a block below the range named --size: $(head -n 1 "$E")"
pp -s 12X </dev/null >"$T/out" 2>"$E"
want_status $? 2
! grep -q -- '--size' "$E" || bad "an invalid block size named --size: $(head -n 1 "$E")"
end

begin unknown_long_option_named
pp --bogus=3 </dev/null 2>"$E"
want_status $? 2
want_grep "^pagepipe: unrecognized option '--bogus'\$" "$E" stderr
end

# An unambiguous prefix and an exact name that is a prefix of another work.
accept_prefix() {
	begin "accept_prefix_$1"
	shift
	gen_random "$T/small1" 5000
	rm -f "$T/ok1"
	pp "$@" "$T/ok1" <"$T/small1" 2>"$E"
	want_status $? 0
	want_same "$T/small1" "$T/ok1"
	want_empty "$E" stderr
	end
}
accept_prefix mem --mem=8M -o
accept_prefix output_exact --output

# -o itself missing its argument (the usage() helper puts an -o first).
begin usage_missing_argument_output
pp -o </dev/null >"$T/out" 2>"$E"
want_status $? 2
[ "$(tail -n 1 "$E")" = "$try_line" ] || bad "last stderr line: $(tail -n 1 "$E")"
want_grep '^pagepipe: ' "$E" stderr
end

# 65 outputs: one too many (64 is the maximum and works).
args=()
for i in $(seq 1 65); do args+=(-o "$T/many.$i"); done
begin usage_65_outputs
rm -f "$T"/many.*
pp "${args[@]}" </dev/null >"$T/out" 2>"$E"
want_status $? 2
[ "$(tail -n 1 "$E")" = "$try_line" ] || bad "last stderr line: $(tail -n 1 "$E")"
want_grep '^pagepipe: ' "$E" stderr
[ ! -e "$T/many.1" ] || bad "outputs were created despite the usage error"
end

begin outputs_64_allowed
rm -f "$T"/many.*
gen_random "$T/small" 70000
pp "${args[@]:0:128}" -i "$T/small" 2>"$E"
want_status $? 0
for i in 1 32 64; do want_same "$T/small" "$T/many.$i"; done
[ ! -e "$T/many.65" ] || bad "a 65th output appeared"
end

# Valid spellings are accepted.
accept() {
	local name=$1
	shift
	begin "accept_$name"
	pp "$@" -o "$T/ok" <"$T/small" >"$T/out" 2>"$E"
	want_status $? 0
	want_same "$T/small" "$T/ok"
	want_empty "$E" stderr
	end
}
accept memory_64K -m 64K
accept memory_65536 -m 65536
accept memory_2G -m 2G
accept memory_2147483648 -m 2147483648
accept memory_64MiB -m 64MiB
accept memory_64MB -m 64MB
accept memory_lower_k -m 512k
accept memory_lower_g -m 1g
accept memory_long_option --memory=8M
accept block_4K -s 4K
accept block_16M -s 16M
accept block_long --block=256KiB
accept start_at_0_100 -P 0 -P 100
accept start_long --start-at=30
accept resume_0 -p 0
accept resume_long --resume-at=100
accept rate_0 -L 0
accept rate_1T -L 1T
accept output_error_modes --output-error=warn --output-error=exit --output-error=exit-nopipe --output-error=warn-nopipe
accept progress_never --progress=never
accept size_1K --size=1K
accept quiet_long --quiet
accept input_long_dash --input=-

begin help_long
pp --help </dev/null >"$T/out" 2>"$E"
want_status $? 0
want_empty "$E" stderr
want_grep 'pagepipe' "$T/out" "help text"
want_grep '--output-error' "$T/out" "help text"
want_grep '--memory' "$T/out" "help text"
end

begin help_short
pp -h </dev/null >"$T/out2" 2>"$E"
want_status $? 0
want_empty "$E" stderr
cmp -s "$T/out" "$T/out2" || bad "-h and --help differ"
end

begin help_wins_over_other_options
pp -m 1M --help -o "$T/never" </dev/null >"$T/out2" 2>"$E"
want_status $? 0
[ ! -e "$T/never" ] || bad "--help opened an output"
want_grep 'pagepipe' "$T/out2" "help text"
end

version=$(sed -n 's/^#define PAGEPIPE_VERSION "\(.*\)"/\1/p' "$SRCROOT/include/pagepipe.h")
for v in --version -V; do
	begin "version${v//-/_}"
	pp $v </dev/null >"$T/out" 2>"$E"
	want_status $? 0
	want_empty "$E" stderr
	[ "$(head -n 1 "$T/out")" = "pagepipe $version" ] ||
		bad "first line \"$(head -n 1 "$T/out")\", want \"pagepipe $version\""
	end
done

# Endpoints that cannot be opened: status 1 and a message naming them.
begin input_missing_file
pp -i "$T/no/such/file" -o "$T/o1" </dev/null >"$T/out" 2>"$E"
want_status $? 1
want_grep "^pagepipe: $T/no/such/file: No such file or directory\$" "$E" stderr
want_prefixed "$E"
end

begin input_is_directory
pp -i "$T" -o "$T/o1" </dev/null 2>"$E"
want_status $? 1
want_grep "^pagepipe: $T: Is a directory\$" "$E" stderr
end

begin input_stdin_is_directory
pp -o "$T/o1" <"$T" 2>"$E"
want_status $? 1
want_grep "^pagepipe: standard input: Is a directory\$" "$E" stderr
want_prefixed "$E"
end

begin output_in_missing_directory
pp -i "$T/small" -o "$T/nodir/out" 2>"$E"
want_status $? 1
want_grep "^pagepipe: $T/nodir/out: No such file or directory\$" "$E" stderr
want_prefixed "$E"
end

begin output_is_directory
pp -i "$T/small" -o "$T" 2>"$E"
want_status $? 1
want_grep "^pagepipe: $T: Is a directory\$" "$E" stderr
end

begin output_missing_directory_among_others
pp -i "$T/small" -o "$T/o1" -o "$T/nodir/out" -o - 2>"$E" >"$T/out"
want_status $? 1
want_grep "^pagepipe: $T/nodir/out: No such file or directory\$" "$E" stderr
end

finish
