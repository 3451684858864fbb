#!/usr/bin/env bash
# output_leaves_nosplice.sh - an output that goes away while the others go on (leaves_lib.bash
# has the matrix and what each cell checks), on the buffer path
# as forced by --no-splice (also with a 64K buffer, and the leaving output
# alone) and by a memory limit too big for kernel pipes (-m 600M; it cannot
# fill from the 4 MiB input, so only its not-full cells).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/leaves_lib.bash"

leaves_matrix \
	"buf_nosplice|-m 256K --no-splice" \
	"buf_nosplice64k|-m 64K --no-splice" \
	"buf_bigmem|-m 600M" \
	"buf_solo|-m 256K --no-splice"

finish
