#!/usr/bin/env bash
# output_leaves_spill.sh - an output that goes away while the others go on
# (leaves_lib.bash has the matrix and what each cell checks), on the buffer
# path with a spill directory (-T): the outputs that lag spill to their
# files, and --spill-max makes the input stop once 64 KiB are on disk, so
# "full" here is memory and spill files full.  (Small, because a tcp
# output's socket buffers take megabytes: the buffer must still fill
# before the 4 MiB input is all read.)  An output that leaves while
# spilling gives its file back and costs the others nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/leaves_lib.bash"

mkdir -p "$T/spilldir"
leaves_matrix \
	"spill|-m 64K -s 16K -T $T/spilldir --spill-max=64K" \
	"spill_solo|-m 64K -s 16K -T $T/spilldir --spill-max=64K"

finish
