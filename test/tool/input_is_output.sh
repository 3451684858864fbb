#!/usr/bin/env bash
# input_is_output.sh - an output that is the input file is refused, as
# cat(1) refuses it ("input file is output file"), whether it is named with
# -o or is standard output (issue 14: `pagepipe < f >> f` appended to f
# without end); the other outputs still get every byte; and the cases cat
# lets through (nothing left to read) are let through too.
. "$(dirname "$0")/lib.sh"

gen_random "$T/in" 300000
cp "$T/in" "$T/keep"

begin stdout_appends_to_input
cp "$T/keep" "$T/f"
pp <"$T/f" >>"$T/f" 2>"$E"
want_status $? 1
want_grep '^pagepipe: standard output: input file is output file$' "$E" stderr
want_prefixed "$E"
want_same "$T/keep" "$T/f"
end

begin stdout_is_input_opened_read_write
cp "$T/keep" "$T/f"
pp <"$T/f" 1<>"$T/f" 2>"$E"
want_status $? 1
want_grep '^pagepipe: standard output: input file is output file$' "$E" stderr
want_same "$T/keep" "$T/f"
end

begin stdout_is_input_with_another_output
cp "$T/keep" "$T/f"
rm -f "$T/o2"
pp -o "$T/o2" -o - <"$T/f" >>"$T/f" 2>"$E"
want_status $? 1
want_grep '^pagepipe: standard output: input file is output file$' "$E" stderr
want_same "$T/keep" "$T/f"
want_same "$T/keep" "$T/o2"
end

begin stdout_is_input_under_output_error_exit
cp "$T/keep" "$T/f"
rm -f "$T/o2"
pp --output-error=exit -o - -o "$T/o2" <"$T/f" >>"$T/f" 2>"$E"
want_status $? 1
want_grep 'input file is output file' "$E" stderr
want_same "$T/keep" "$T/f"
[ ! -s "$T/o2" ] || bad "o2 written although the run was to stop"
end

begin named_output_is_input
cp "$T/keep" "$T/f"
pp -i "$T/f" -o "$T/f" 2>"$E"
want_status $? 1
want_grep "^pagepipe: $T/f: input file is output file\$" "$E" stderr
want_same "$T/keep" "$T/f"
end

begin named_output_is_input_appending
cp "$T/keep" "$T/f"
pp -a -o "$T/f" <"$T/f" 2>"$E"
want_status $? 1
want_grep "^pagepipe: $T/f: input file is output file\$" "$E" stderr
want_same "$T/keep" "$T/f"
end

# As cat: nothing is left to read, so there is no loop.
begin stdout_is_input_read_to_its_end
cp "$T/keep" "$T/f"
(
	exec <"$T/f"
	dd bs=300000 count=1 iflag=fullblock of=/dev/null status=none
	"$PAGEPIPE" >>"$T/f"
) 2>"$E"
want_status $? 0
want_empty "$E" stderr
want_same "$T/keep" "$T/f"
end

begin stdout_truncated_by_the_shell
cp "$T/keep" "$T/f"
pp <"$T/f" >"$T/f" 2>"$E"
want_status $? 0
want_empty "$E" stderr
[ "$(fsize "$T/f")" -eq 0 ] || bad "f has $(fsize "$T/f") bytes, want 0 (the shell emptied it)"
end

begin stdout_another_file
rm -f "$T/o1"
pp <"$T/in" >>"$T/o1" 2>"$E"
want_status $? 0
want_empty "$E" stderr
want_same "$T/in" "$T/o1"
end

finish
