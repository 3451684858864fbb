#!/usr/bin/env bash
# output_leaves_kernel.sh - an output that goes away while the others go on (leaves_lib.bash
# has the matrix and what each cell checks), on the kernel
# paths: tee(2) with survivors, splice(2) with the leaving output alone
# (/dev/full is not for splice: its cells take the buffer path), and
# tee(2) with a rate limit (-L) on every output, paced by the output threads.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/leaves_lib.bash"

leaves_matrix \
	"kernel_tee|-m 256K" \
	"kernel_splice_solo|-m 256K" \
	"kernel_rate|-m 256K -L 1G"

finish
