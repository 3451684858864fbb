#!/usr/bin/env bash
# sanitizer_build.sh - the command's sources compile without a warning
# under -fsanitize=undefined at the default -O2, with gcc and with clang
# (issue 14: gcc 12's format-truncation check stopped `make
# SANFLAGS=-fsanitize=undefined`, since -Werror made the warning an error).
# Compiles only (-c), no link; a compiler that is not installed is skipped.
# Also: a name too long for the messages' buffer is cut with "...".
. "$(dirname "$0")/lib.sh"

flags=(-std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$SRCROOT/include" -I"$SRCROOT/src"
       -O2 -fsanitize=undefined)
for cc in gcc clang; do
	begin "ubsan_O2_build_$cc"
	if ! command -v "$cc" >/dev/null 2>&1; then
		skip_case "$cc not installed"
		continue
	fi
	for src in "$SRCROOT"/tools/pagepipe/*.c; do
		if ! "$cc" "${flags[@]}" -c "$src" -o "$T/obj.o" 2>>"$E"; then
			bad "$cc: $(basename "$src") does not compile: $(grep -m1 -E 'error' "$E")"
		fi
	done
	end
done

begin long_output_name_cut
d=$T/$(printf 'a%.0s' $(seq 1 200))/$(printf 'b%.0s' $(seq 1 200))
mkdir -p "$d"
printf 'x' | pp --stats -o "$d/out" 2>"$E"
want_status $? 0
want_grep '^pagepipe: output 1 \(/.*aaaa.*bbbb\.\.\.\): 1 bytes, done$' "$E" stats
end

finish
