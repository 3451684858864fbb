#!/bin/sh
# make_seeds.sh - write the hand-made seed inputs of test/fuzz/corpus/
# (fuzz_ops.c), test/fuzz/corpus_zc/ (fuzz_zerocopy.c),
# test/fuzz/corpus_opts/ (fuzz_opts.c) and test/fuzz/corpus_hostile/
# (fuzz_hostile.c).
#
# Usage: test/fuzz/make_seeds.sh [DIR [ZCDIR [OPTSDIR [HOSTILEDIR]]]]
#   (default: test/fuzz/corpus, test/fuzz/corpus_zc, test/fuzz/corpus_opts,
#   test/fuzz/corpus_hostile)
#
# Each seed is a short, meaningful scenario in the input language of
# fuzz_ops.c, written as hex bytes.  The language, one operation after
# another (pipe 0, blocking, stream mode, exists before the first one; a
# "pipe" byte indexes the live pipes, a "handle" byte the open handles of
# the side; side is bit 0 of its byte, 0 read, 1 write):
#   00 FL                          pp_pipe: FL bit0 NONBLOCK, bit1 PACKET,
#                                  bit2 NOSIGPIPE; f8..ff: an invalid flag
#   01|02|03 PIPE H SIZE MODE [SEG..]  write; MODE bit0: on a blocking end a
#                                  call that would wait is made non-blocking
#                                  (else skipped); bits1-3: 0 pp_write, N
#                                  pp_writev with N segments, N-1 SEG bytes
#                                  giving each one's share of what is left
#   04|05|06 PIPE H SIZE MODE [SEG..]  read, likewise
#   07 PIPE SIDE H FL              pp_setfl
#   08 PIPE SIDE H                 pp_dup
#   09 PIPE SIDE H                 pp_close
#   0a|0b PIPE SIDE CAP H          pp_setsize
#   0c PIPE SIDE H                 pp_fd
#   0d K V [CAP]                   pool: K%5 0 setcache(V%130; ff: -1),
#                                  1 trim, 2 setlimit(V%80; ff: -1),
#                                  3 setmaxsize(CAP), 4 pp_pool_stats(NULL)
#   0e PIPE C H                    a call that must fail: (C>>1)%4 0 wrong
#                                  end, 1 NULL buffer, 2 bad iovcnt, 3 lengths
#                                  past SSIZE_MAX
#   0f                             nothing (only the checks)
# SIZE: 00-1f that many bytes; 20 B: 1+B; 40-5f: 4080+low 5 bits (50 =
# 4096); 60-7f: (low+1) pages; 80 L H: 16 bits; a0 L M H: 24 bits (max
# 300000); c0-df D: (low+1) pages + (signed) D; e0-ff: odd sizes.
# CAP (< c8): 00 0, 01 1, 02 4095, 03 4096, 04 4097, 05 8191, 06 8192,
# 07 12288, 08 16384, 09 32768, 0a 65535, 0b 65536, 0c 65537, 0d 128K,
# 0e 256K, 0f 1M-1, 10 1M, 11 1M+1, 12 2M, 13 2^31, 14 2^31+1, 15 SIZE_MAX,
# 16 8193, 17 12288.
set -eu
dir=${1:-$(dirname "$0")/corpus}
mkdir -p "$dir"

# seed NAME HEX...: write the bytes (comments after '#' are dropped).
seed() {
	name=$1
	shift
	printf '%s\n' "$*" | sed 's/#[^|]*//g' | tr -s ' |' '\n\n' | grep -v '^$' |
		while read -r b; do printf "\\$(printf '%03o' "0x$b")"; done >"$dir/$name"
}

seed s01_write_read       01 00 00 0a 00 '|' 04 00 00 0a 00
seed s02_small_merge      01 00 00 01 00 '|' 01 00 00 01 00 '|' 01 00 00 05 00 '|' 04 00 00 03 00 '|' 04 00 00 20 63 00
seed s03_page_edges       01 00 00 4f 00 '|' 01 00 00 50 00 '|' 01 00 00 51 00 '|' 04 00 00 51 00 '|' 04 00 00 6f 00
seed s04_fill_nonblock    07 00 01 00 01 '|' 01 00 00 6f 00 '|' 01 00 00 01 00 '|' 04 00 00 01 00 '|' 01 00 00 50 00 '|' 01 00 00 01 00 '|' 04 00 00 4f 00 '|' 01 00 00 50 00
seed s05_long_partial     07 00 01 00 01 '|' 01 00 00 7f 00 '|' 04 00 00 7f 00
seed s06_blocking_toggle  01 00 00 7f 01 '|' 01 00 00 01 01 '|' 04 00 00 7f 00 '|' 04 00 00 0a 01
seed s07_read_empty       04 00 00 0a 01 '|' 07 00 00 00 01 '|' 04 00 00 0a 00 '|' 07 00 00 00 00 '|' 04 00 00 0a 00
seed s08_eof              09 00 01 00 '|' 04 00 00 0a 00 '|' 04 00 00 0a 01
seed s09_eof_after_data   01 00 00 20 63 00 '|' 09 00 01 00 '|' 04 00 00 20 31 00 '|' 04 00 00 20 63 00 '|' 04 00 00 20 63 00
seed s10_epipe_sigpipe    09 00 00 00 '|' 01 00 00 0a 00 '|' 01 00 00 00 00 '|' 01 00 00 7f 01
seed s11_epipe_nosigpipe  00 04 '|' 09 01 00 00 '|' 01 01 00 0a 00 '|' 01 00 00 0a 00
seed s12_packet_basic     00 02 '|' 01 01 00 20 63 00 '|' 01 01 00 20 63 00 '|' 01 01 00 20 63 00 '|' 04 01 00 20 31 00 '|' 04 01 00 50 00 '|' 04 01 00 01 00
seed s13_packet_long      00 02 '|' 01 01 00 80 10 27 00 '|' 04 01 00 80 10 27 00 '|' 04 01 00 80 10 27 00 '|' 04 01 00 80 10 27 00
seed s14_packet_nonblock  00 03 '|' 01 01 00 7f 00 '|' 01 01 00 01 00 '|' 04 01 00 20 63 00 '|' 01 01 00 01 00 '|' 04 01 00 7f 00
seed s15_dup_writer       08 00 01 00 '|' 09 00 01 00 '|' 01 00 00 0a 00 '|' 04 00 00 0a 00 '|' 09 00 01 00 '|' 04 00 00 0a 00
seed s16_dup_reader       08 00 00 00 '|' 09 00 00 00 '|' 01 00 00 0a 00 '|' 04 00 00 05 00 '|' 09 00 00 00 '|' 01 00 00 0a 00
seed s17_setsize_round    0a 00 00 00 00 '|' 0a 00 01 01 00 '|' 0a 00 00 04 00 '|' 0a 00 01 0c 00 '|' 0a 00 00 14 00 '|' 0a 00 00 15 00 '|' 0a 00 00 12 00 '|' 0a 00 01 10 00 '|' 0a 00 00 0f 00
seed s18_setsize_ebusy    01 00 00 64 00 '|' 0a 00 00 03 00 '|' 0a 00 00 06 00 '|' 0a 00 00 16 00 '|' 04 00 00 6f 00 '|' 0a 00 00 03 00
seed s19_setsize_wrap     07 00 01 00 01 '|' 01 00 00 6b 00 '|' 04 00 00 69 00 '|' 01 00 00 69 00 '|' 0a 00 00 08 00 '|' 0a 00 00 0d 00 '|' 04 00 00 6f 00 '|' 01 00 00 7f 00 '|' 0a 00 01 08 00 '|' 04 00 00 7f 00
seed s20_maxsize          0d 03 00 12 '|' 0a 00 00 12 00 '|' 0d 03 00 00 '|' 0d 03 00 14 '|' 0d 03 00 01 '|' 0a 00 00 0b 00 '|' 0a 00 00 0d 00 '|' 0d 03 00 10
seed s21_limit_enomem     0d 02 02 '|' 01 00 00 62 00 '|' 01 00 00 01 00 '|' 04 00 00 50 00 '|' 01 00 00 01 00 '|' 01 00 00 01 00 '|' 0d 02 00 '|' 01 00 00 62 00 '|' 0d 02 ff
seed s22_cache_trim       0d 00 00 '|' 01 00 00 62 00 '|' 04 00 00 62 00 '|' 0d 00 05 '|' 01 00 00 67 00 '|' 04 00 00 67 00 '|' 0d 01 00 '|' 0d 00 ff '|' 0d 00 40
seed s23_fd_events        0c 00 00 00 '|' 0c 00 01 00 '|' 01 00 00 0a 00 '|' 04 00 00 0a 00 '|' 07 00 01 00 01 '|' 01 00 00 6f 00 '|' 04 00 00 01 00 '|' 04 00 00 4f 00 '|' 09 00 01 00 '|' 04 00 00 6f 00 '|' 04 00 00 6f 00
seed s24_readv_segments   01 00 00 80 10 27 00 '|' 04 00 00 80 88 13 0e 20 00 80 ff 10 40 '|' 04 00 00 6f 06 80 80
seed s25_writev_segments  01 00 00 80 88 13 08 40 00 c0 '|' 01 00 00 51 0c 01 fe 00 00 80 '|' 04 00 00 6f 00
seed s26_bad_calls        0e 00 00 00 '|' 0e 00 01 00 '|' 0e 00 02 00 '|' 0e 00 03 00 '|' 0e 00 04 00 '|' 0e 00 15 00 '|' 0e 00 06 00 '|' 0e 00 07 00 '|' 0d 04 00 '|' 01 00 00 0a 00 '|' 0e 00 02 00 '|' 04 00 00 0a 00
seed s27_invalid_flags    00 f8 '|' 00 f9 '|' 00 fa '|' 00 ff '|' 01 00 00 0a 00
seed s28_many_pipes       00 00 '|' 00 01 '|' 00 02 '|' 00 05 '|' 00 07 '|' 01 01 00 20 63 00 '|' 01 02 00 50 00 '|' 01 03 00 51 00 '|' 01 04 00 7f 01 '|' 01 05 00 6f 00 '|' 09 02 00 00 '|' 09 02 01 00 '|' 09 03 01 00 '|' 04 03 00 6f 00 '|' 09 01 00 00 '|' 00 00
seed s29_merge_offset     01 00 00 20 63 00 '|' 04 00 00 20 31 00 '|' 01 00 00 80 a0 0f 00 '|' 01 00 00 80 a0 0f 00 '|' 04 00 00 6f 00
seed s30_merge_exact      01 00 00 20 5f 00 '|' 01 00 00 80 a0 0f 00 '|' 01 00 00 01 00 '|' 04 00 00 50 00 '|' 04 00 00 50 00
seed s31_one_page_small   0a 00 00 03 00 '|' 07 00 01 00 01 '|' 01 00 00 01 00 '|' 01 00 00 01 00 '|' 01 00 00 01 00 '|' 01 00 00 80 fd 0f 00 '|' 01 00 00 01 00 '|' 04 00 00 50 00 '|' 01 00 00 01 00
seed s32_reader_closed_data 01 00 00 64 00 '|' 09 00 00 00 '|' 01 00 00 01 00 '|' 0f '|' 09 00 01 00 '|' 0f
seed s33_full_merge       07 00 01 00 01 '|' 01 00 00 6e 00 '|' 01 00 00 20 63 00 '|' 01 00 00 20 63 00 '|' 01 00 00 50 00 '|' 01 00 00 4f 00
seed s34_zero_length      01 00 00 00 00 '|' 04 00 00 00 00 '|' 01 00 00 00 06 80 80 '|' 04 00 00 00 06 80 80 '|' 09 00 00 00 '|' 01 00 00 00 00 '|' 01 00 00 00 06 40 40
seed s35_setfl_garbage    07 00 00 00 ff '|' 07 00 81 00 fe '|' 08 00 00 00 '|' 07 00 00 01 00 '|' 04 00 00 0a 00
seed s36_packet_readv     00 02 '|' 01 01 00 80 2c 01 00 '|' 01 01 00 0a 00 '|' 04 01 00 20 63 06 80 00 '|' 04 01 00 80 2c 01 08 10 20 30 '|' 04 01 00 01 00
seed s37_big_io           0a 00 00 0e 00 '|' 01 00 00 a0 e0 93 04 01 '|' 04 00 00 a0 e0 93 04 0e 10 20 30 40 50 60 '|' 04 00 00 a0 e0 93 04 01
seed s38_shrink_write     01 00 00 0a 00 '|' 0a 00 01 06 00 '|' 07 00 01 00 01 '|' 01 00 00 6f 00 '|' 0a 00 00 03 00 '|' 04 00 00 6f 00 '|' 0a 00 00 03 00 '|' 01 00 00 6f 00
seed s39_fd_close_ends    0c 00 00 00 '|' 0c 00 01 00 '|' 08 00 01 00 '|' 09 00 00 00 '|' 0f '|' 09 00 01 00 '|' 0f '|' 09 00 01 00
seed s40_limit_merge      0d 02 01 '|' 01 00 00 20 63 00 '|' 01 00 00 20 63 00 '|' 01 00 00 50 00 '|' 00 00 '|' 01 01 00 0a 00 '|' 04 00 00 6f 00 '|' 01 01 00 0a 00
seed s41_fd_full_pipe     0c 00 01 00 '|' 07 00 01 00 01 '|' 01 00 00 6f 00 '|' 04 00 00 20 63 00 '|' 04 00 00 80 9c 0f 00 '|' 0a 00 00 0d 00 '|' 09 00 00 00
seed s42_dup_fd_share     0c 00 00 00 '|' 08 00 00 00 '|' 0c 00 00 01 '|' 09 00 00 00 '|' 01 00 00 0a 00 '|' 04 00 00 0a 00
seed s43_maxsize_below     0d 03 00 03 '|' 0a 00 00 0b 00 '|' 0a 00 01 0c 00 '|' 0a 00 00 06 00 '|' 0a 00 00 06 00 '|' 0a 00 00 0b 00 '|' 0d 03 00 10 '|' 0a 00 00 0b 00
seed s44_limit_batch_enomem 0d 02 01 '|' 01 00 00 50 00 '|' 01 00 00 62 00 '|' 0d 02 03 '|' 04 00 00 6f 00 '|' 01 00 00 20 63 00 '|' 01 00 00 80 64 40 00 '|' 04 00 00 6f 00 '|' 0d 02 00
seed s45_read_many_buffers  0a 00 00 10 00 '|' 01 00 00 a0 e0 93 04 01 '|' 04 00 00 a0 e0 93 04 00
# 300 handles made and closed: the handle quarantine (256) starts reusing.
seed s46_many_handles $(i=0; while [ $i -lt 300 ]; do printf '08 00 01 00 09 00 01 01 '; i=$((i + 1)); done)
# A 1 MiB pipe filled, drained and filled again: the pool keeps the pages
# it has room for; a cache bound, a shrink and the close give them back.
seed s47_deep_pipe_cache  0a 00 01 10 00 '|' 01 00 00 a0 e0 93 04 00 '|' 04 00 00 a0 e0 93 04 00 '|' 01 00 00 a0 e0 93 04 00 '|' 04 00 00 80 00 80 00 '|' 0d 00 0a '|' 04 00 00 a0 e0 93 04 00 '|' 0d 00 ff '|' 01 00 00 a0 e0 93 04 00 '|' 04 00 00 a0 e0 93 04 00 '|' 0a 00 01 0b 00 '|' 09 00 01 00 '|' 09 00 00 00
ls "$dir" | wc -l | sed 's/$/ seeds in '"$(echo "$dir" | sed 's/[\/&]/\\&/g')"'/'

# ---- fuzz_zerocopy.c --------------------------------------------------------
# Its language (two pipes exist before the first operation: pipe 0 blocking
# with PP_NOSIGPIPE, pipe 1 non-blocking without it).  A PIPE byte indexes
# the live pipes whose needed side is open (IN/read: read end open, OUT and
# write: write end open); C bit 0 is a side (0 read, 1 write):
#   00 FL                       pp_pipe: FL bit0 NONBLOCK, bit1 PACKET, bit2 NOSIGPIPE
#   01 PIPE SIZE MODE           pp_write; MODE bit0: a call that would wait is
#                               made on the end made non-blocking (else skipped)
#   02 PIPE SIZE MODE           pp_read, likewise
#   03|04 IN OUT LEN FL         pp_splice; FL bit0 MOVE, bit1 NONBLOCK, bit2
#                               MORE, bit3 GIFT, f0..ff: an unknown flag too
#   05 IN OUT LEN FL            pp_tee
#   06 IN N OUT.. LEN FL        pp_fanout to 1 + N%4 outputs
#   07 PIPE N (SEG AL).. FL     pp_vmsplice of 1 + N%4 segments: SEG < 40 that
#                               many bytes (mod 40), < 80 (SEG&3)+1 pages, else
#                               (SEG&7f)*97 + (SEG&1)*4096; AL%64: misalignment
#   08 PIPE SRC LEN OFF ADD FL  pp_splice_from_fd: SRC%3 0 source file at its
#                               position, 1 at offset OFF*1031, 2 the kernel
#                               pipe (ADD: bytes put in it first); high nibble
#                               f: fd -1, e: kernel pipe with an offset, d: a
#                               negative offset
#   09 PIPE DST LEN OFF FL      pp_splice_to_fd: DST%3 0 sink file at its
#                               position, 1 at an offset, 2 the kernel pipe;
#                               f, e as above
#   0a PIPE MAX C V             pp_peek(MAX%10; ff: -1, fe: IOV_MAX+1), then
#                               pp_consume of C%4 0 all, 1 all+1+V (EINVAL),
#                               2 the first segment, 3 V/255 of it; C bit7: a
#                               blocking empty peek made non-blocking
#   0b C PIPE                   C bit1: pp_fd, else pp_setfl (C bit2: NONBLOCK)
#   0c C PIPE                   pp_close of side C&1
#   0d C PIPE                   pp_setsize of entry (C>>1)%12 of 1, 4K, 8K, 12K,
#                               16K, 32K, 64K, 128K, 256K, 1M, 2M, 5000
#   0e C PIPE                   a call that must fail (C%8 picks, C bits 3-5 vary)
#   0f                          nothing (only the checks)
#   1f C OFF [SIZE]             the source file: C%3 0 seal it with F_SEAL_SHRINK
#                               (for the rest of the input pp_splice_from_fd maps
#                               its pages: no pool page, no merging, and a write
#                               to the file shows in them), 1 pwrite SIZE bytes
#                               at OFF*1031 (past the end: it grows), 2
#                               ftruncate to OFF*1031 (EPERM if sealed and
#                               smaller); it starts unsealed, 200000 bytes
#   2f|4f|..|ef C PIPE LEN M MODE  pp_reserve of LEN bytes (a SIZE up to
#                               300000, 1 GiB or SIZE_MAX) into M segments: M ff max -1, fe IOV_MAX+1
#                               (EINVAL), fd a NULL iov (EFAULT), fc IOV_MAX,
#                               else M%72; C%8 7 on a read end (EBADF), else
#                               the write end (a second one: EBUSY); MODE
#                               bit0 as pp_write's.  The segments are filled
#                               at once; the reservation stays open across
#                               the steps after it until a commit or a close
#   3f|5f|..|ff C PIPE V        pp_commit: C%8 7 on a read end (EBADF), else
#                               the write end, of (C>>3)%5 0 nothing (all
#                               given back), 1 all reserved, 2 V/255 of it,
#                               3 1+V bytes more (EINVAL, it stays), 4 V%17
#                               pages; without a reservation 0 for 0, else
#                               EINVAL
# SIZE as above; LEN is a SIZE, or ff (1 GiB: everything), fe (SIZE_MAX).
dir=${2:-$(dirname "$0")/corpus_zc}
mkdir -p "$dir"
seed z01_splice_move        01 00 61 00 '|' 03 00 01 ff 00 '|' 02 01 61 00
seed z02_splice_partial     01 00 80 88 13 00 '|' 03 00 01 20 63 00 '|' 01 00 0a 00 '|' 02 00 7f 00 '|' 02 01 7f 00
seed z03_tee_no_merge       01 00 80 b8 0b 00 '|' 05 00 01 ff 00 '|' 01 00 0a 00 '|' 01 01 0a 00 '|' 02 00 7f 00 '|' 02 01 7f 00
seed z04_tee_consume_merge  01 00 20 63 00 '|' 05 00 01 ff 00 '|' 02 01 7f 00 '|' 01 00 0a 00 '|' 0a 00 05 00 00
seed z05_fanout             00 05 '|' 01 00 80 28 23 00 '|' 06 00 01 01 02 ff 00 '|' 0a 01 05 00 00 '|' 02 02 7f 00
seed z06_fanout_full        0d 03 01 '|' 01 01 0a 00 '|' 01 00 0a 00 '|' 06 00 00 01 ff 00 '|' 06 00 00 01 ff 02 '|' 02 01 0a 00 '|' 06 00 00 01 ff 00
seed z07_vmsplice_release   07 00 01 85 07 90 03 00 '|' 02 00 20 63 00 '|' 02 00 7f 00 '|' 02 00 7f 00
seed z08_vmsplice_tee       07 00 00 41 00 00 '|' 05 00 01 ff 00 '|' 02 00 7f 00 '|' 02 01 7f 00
seed z09_vmsplice_close     07 00 02 81 01 ff 02 20 05 08 '|' 0c 01 00 '|' 0c 00 00
seed z10_from_file          08 01 00 61 00 00 00 '|' 08 01 01 61 05 00 00 '|' 02 01 7f 00 '|' 08 01 00 ff 00 00 00
seed z11_to_file            01 00 80 28 23 00 '|' 09 00 00 80 e8 03 00 00 '|' 09 00 01 ff 02 00 '|' 09 00 00 ff 00 00
seed z12_kernel_pipe        08 01 02 ff 00 80 10 27 00 '|' 09 01 02 ff 00 00 '|' 08 01 02 ff 00 00 00
seed z13_epipe_sigpipe      00 01 '|' 01 01 0a 00 '|' 0c 00 02 '|' 03 01 02 ff 00 '|' 07 02 00 0a 00 00 '|' 08 02 00 0a 00 00 00 '|' 01 02 0a 00
seed z14_eof                01 00 0a 00 '|' 0c 01 00 '|' 03 00 01 ff 00 '|' 03 00 01 ff 00 '|' 09 00 00 ff 00 00 '|' 0a 00 05 00 00
seed z15_peek_consume       01 01 0a 00 '|' 01 01 61 00 '|' 01 01 20 63 00 '|' 0a 01 02 02 00 '|' 0a 01 09 03 80 '|' 0a 01 09 01 05 '|' 0a 01 09 00 00
seed z16_packet_splice      00 07 '|' 01 02 0a 00 '|' 01 02 20 63 00 '|' 01 02 05 00 '|' 03 02 01 ff 00 '|' 02 01 7f 00 '|' 02 01 03 00 '|' 02 01 7f 00
seed z17_blocking_waits     03 00 01 ff 00 '|' 0b 01 01 '|' 03 00 01 ff 00 '|' 0d 01 00 '|' 07 00 00 41 00 00 '|' 07 00 00 0a 00 00 '|' 02 00 7f 00
seed z18_pp_fd              0b 02 01 '|' 0b 03 01 '|' 01 01 0a 00 '|' 03 01 00 ff 00 '|' 0b 02 00 '|' 05 00 01 ff 00 '|' 0a 01 09 00 00 '|' 02 00 7f 00
seed z19_setsize_ebusy      01 00 7f 01 '|' 03 00 01 ff 00 '|' 0d 05 01 '|' 0d 13 01 '|' 0d 15 00
seed z20_bad_calls          0e 00 00 '|' 0e 08 00 '|' 0e 10 00 '|' 0e 20 00 '|' 0e 01 00 '|' 0e 09 00 '|' 0e 02 00 '|' 0e 0a 00 '|' 0e 12 00 '|' 0e 03 00 '|' 0e 0b 00 '|' 0e 04 00 '|' 0e 0c 00 '|' 0e 05 00 '|' 0e 0d 00 '|' 0e 06 00 '|' 0e 0e 00 '|' 0e 07 00 '|' 0e 0f 00
seed z21_invalid_pairs      03 00 00 0a 00 '|' 05 01 01 0a 00 '|' 06 00 02 01 01 01 0a 00 '|' 03 00 01 0a f0 '|' 05 00 01 00 f0 '|' 03 00 01 00 f0
seed z22_fd_errors          08 01 f0 0a 00 00 00 '|' 08 01 e0 0a 00 00 00 '|' 08 01 d0 0a 05 00 00 '|' 08 01 00 fe 00 00 00 '|' 09 00 e0 0a 00 00 '|' 09 00 f0 0a 00 00
seed z23_ring_cycles        $(i=0; while [ $i -lt 6 ]; do printf '01 00 64 01 | 03 00 01 ff 00 | 02 01 80 00 50 00 | 05 00 01 20 40 00 | 0a 00 09 00 00 | '; i=$((i + 1)); done)
seed z24_splice_chain       00 05 '|' 00 05 '|' 01 00 80 88 13 00 '|' 03 00 01 ff 00 '|' 03 01 02 ff 00 '|' 05 02 03 ff 00 '|' 03 02 00 ff 00 '|' 02 00 7f 00 '|' 02 03 7f 00
seed z25_vmsplice_fanout    00 05 '|' 07 00 01 81 00 05 00 00 '|' 06 00 01 01 02 ff 00 '|' 02 01 7f 00 '|' 0c 00 02 '|' 0c 01 02
# Merge rules: a tee'd copy never merges, even once it is the page's only
# reference; a buffer split by a partial splice never merges again.
seed z26_tee_copy_owned     01 00 0a 00 '|' 05 00 01 ff 00 '|' 02 00 7f 00 '|' 01 01 0a 00 '|' 02 01 7f 00
seed z27_split_no_merge     01 00 20 63 00 '|' 03 00 01 20 31 00 '|' 02 01 7f 00 '|' 01 00 0a 00 '|' 0a 00 05 00 00
# A sealed source (1f 00 00): its pages are mapped.  An offset inside a page
# makes the first buffer start there, so a call of N slots takes N pages
# less that lead; at and past the end of the file: 0.
seed z28_sealed_map         1f 00 00 '|' 08 01 00 61 00 00 00 '|' 08 01 01 61 05 00 00 '|' 02 01 7f 00 '|' 08 01 00 ff 00 00 00 '|' 02 01 7f 00 '|' 08 01 01 ff c2 00 00 '|' 08 01 01 ff ff 00 00 '|' 0a 01 09 00 00
# Writes to the file after the splice show in the mapped buffers (and in a
# tee'd copy of them), not in a pool copy made before the seal.
seed z29_sealed_file_writes 08 00 01 61 03 00 00 '|' 1f 00 00 '|' 08 00 01 62 01 00 00 '|' 05 00 01 ff 00 '|' 1f 01 00 80 10 27 '|' 02 00 7f 00 '|' 1f 01 01 64 '|' 02 01 7f 00 '|' 08 00 00 61 00 00 00 '|' 1f 01 02 63 '|' 09 00 00 ff 00 00
# Truncating: any size before the seal; after it, shrinking is EPERM and
# growing is allowed (zeros, mapped too), as are writes past the end.
seed z30_sealed_truncate    1f 02 ff '|' 1f 02 05 '|' 08 01 00 ff 00 00 00 '|' 1f 00 00 '|' 1f 02 00 '|' 1f 02 04 '|' 1f 02 05 '|' 1f 02 f0 '|' 08 01 00 ff 00 00 00 '|' 1f 01 f8 80 10 27 '|' 08 01 01 ff f7 00 00 '|' 02 01 7f 00 '|' 1f 02 f9 '|' 08 01 01 ff f7 00 00 '|' 0a 01 09 00 00
# Mapped buffers are never merged into: a small write after one takes a
# new page, in stream and packet pipes; split by a partial read they stay
# unmergeable.
seed z31_sealed_no_merge    00 03 '|' 1f 00 00 '|' 08 00 01 0a 02 00 00 '|' 01 00 0a 00 '|' 08 01 00 0a 00 00 00 '|' 01 01 0a 00 '|' 02 00 05 00 '|' 01 00 05 00 '|' 08 02 01 20 63 00 00 00 '|' 01 02 0a 00 '|' 02 00 7f 00 '|' 02 01 7f 00 '|' 02 02 7f 00 '|' 02 02 7f 00
# The mapping lives while any pipe holds one of its pages: fanned out,
# spliced on, to the sink file and the kernel pipe, pipes closed full.
seed z32_sealed_fanout      00 05 '|' 1f 00 00 '|' 08 00 01 80 10 27 03 00 00 '|' 06 00 01 01 02 ff 00 '|' 09 01 00 ff 00 00 '|' 03 02 00 20 63 00 '|' 09 00 02 ff 00 00 '|' 0c 00 00 '|' 0c 01 00 '|' 08 02 00 ff 00 00 00 '|' 0c 00 02 '|' 02 01 7f 00
# One free slot and an offset inside a page: a page less the lead.
seed z33_sealed_one_slot    0d 02 01 '|' 1f 00 00 '|' 08 01 01 50 01 00 00 '|' 02 01 7f 00 '|' 08 01 01 50 04 00 00 '|' 08 01 00 50 00 00 00 '|' 02 01 7f 00 '|' 08 01 00 ff 00 00 00 '|' 02 01 7f 00 '|' 08 01 00 ff 00 00 00
# Many calls, each its own mapping, a write landing in what is in the pipe.
seed z34_sealed_cycles      1f 00 00 $(i=0; while [ $i -lt 8 ]; do printf '| 08 00 00 80 %02x 27 00 00 00 | 1f 01 %02x 20 70 | 05 00 01 20 40 00 | 03 00 01 ff 00 | 02 01 80 00 50 00 | 0a 01 09 00 00 ' $((i * 13)) $((i * 10)); i=$((i + 1)); done)
# The zero-copy writer: a reservation (2f) stays open while other calls
# run, then a commit (3f) publishes part or all of it after what was
# written before; small writes merge into its last page.
seed z35_reserve_commit     2f 00 00 80 10 27 08 00 '|' 3f 10 00 80 '|' 02 00 7f 00 '|' 3f 08 00 00
seed z36_reserve_interleave 2f 00 00 80 10 27 08 00 '|' 01 00 0a 00 '|' 03 00 01 ff 00 '|' 05 01 00 ff 00 '|' 3f 08 00 00 '|' 01 00 05 00 '|' 02 00 7f 00 '|' 02 01 7f 00
# Reserved slots count as used: a full pipe takes no write (EAGAIN), no
# pp_setsize below them (EBUSY); one reservation a handle (EBUSY).
seed z37_reserve_full       0d 08 01 '|' 2f 00 01 a0 00 00 10 40 00 '|' 01 01 01 00 '|' 0d 02 01 '|' 2f 00 01 01 08 00 '|' 03 00 01 ff 02 '|' 3f 10 01 02 '|' 01 01 01 00 '|' 3f 08 01 00 '|' 3f 18 01 00 '|' 02 01 7f 00
# No reader: EPIPE and SIGPIPE at the commit (the space goes back) and at
# the reserve; a commit of 0 is still 0.
seed z38_reserve_epipe      00 01 '|' 2f 00 02 50 04 00 '|' 0c 00 02 '|' 3f 08 02 00 '|' 2f 00 02 50 04 00 '|' 3f 00 02 00 '|' 2f 00 00 50 04 00 '|' 0c 00 00 '|' 3f 08 00 00
# Closing the write end gives an uncommitted reservation back: end of file.
seed z39_reserve_close      01 00 0a 00 '|' 2f 00 00 62 04 00 '|' 0c 01 00 '|' 02 00 7f 00 '|' 02 00 7f 00
seed z40_reserve_errors     2f 07 00 0a 04 00 '|' 2f 00 00 0a ff 00 '|' 2f 00 00 0a fe 00 '|' 2f 00 00 0a fd 00 '|' 2f 00 00 0a 00 00 '|' 2f 00 00 00 04 00 '|' 3f 07 00 00 '|' 3f 00 00 00 '|' 3f 18 00 00 '|' 2f 00 00 0a fc 00 '|' 3f 18 00 05 '|' 3f 08 00 00 '|' 02 00 7f 00
# Packet mode: each committed page is a packet.
seed z41_reserve_packet     00 03 '|' 2f 00 02 80 10 27 08 00 '|' 3f 08 02 00 '|' 01 02 0a 00 '|' 02 02 20 63 00 '|' 02 02 7f 00 '|' 02 02 7f 00 '|' 02 02 7f 00
# At most 64 pages at once; a commit of whole pages, spliced on.
seed z42_reserve_64_pages   0d 12 01 '|' 2f 00 01 a0 e0 93 04 fc 00 '|' 3f 20 01 10 '|' 03 01 00 ff 00 '|' 02 00 7f 00 '|' 02 01 7f 00
# A full blocking pipe: the reserve is skipped, then made non-blocking
# (EAGAIN); a reservation while vmsplice and splice_from_fd fill the rest.
seed z43_reserve_around     01 00 7f 01 '|' 2f 00 00 0a 04 00 '|' 2f 00 00 0a 04 01 '|' 02 00 6f 00 '|' 2f 00 00 6f 40 01 '|' 08 00 00 ff 00 00 00 '|' 07 00 00 41 00 00 '|' 3f 08 00 00 '|' 02 00 7f 00 '|' 02 00 7f 00
# pp_fd descriptors follow reserved slots: a reservation filling the pipe
# takes the write end's readiness, a commit of 0 gives it back, a commit
# makes the read end ready.
seed z44_reserve_pp_fd      0b 03 01 '|' 0b 02 01 '|' 0d 08 01 '|' 2f 00 01 7f 40 00 '|' 3f 00 01 00 '|' 2f 00 01 7f 40 00 '|' 3f 10 01 40 '|' 02 01 7f 00 '|' 2f 00 01 7f 40 00 '|' 0c 00 01 '|' 3f 08 01 00
# The last end closed holds a reservation: the pipe goes with it.
seed z45_reserve_last_close 2f 00 00 80 10 27 08 00 '|' 2f 00 01 62 08 00 '|' 0c 00 00 '|' 0c 01 00 '|' 01 00 0a 00 '|' 0c 00 00 '|' 0c 01 00
# Lengths past any reservation: 1 GiB and SIZE_MAX, 64 pages at most.
seed z46_reserve_huge       0d 12 01 '|' 2f 00 01 ff fc 00 '|' 3f 08 01 00 '|' 2f 00 01 fe 40 00 '|' 3f 10 01 ff '|' 03 01 00 ff 00 '|' 2f 00 00 fe 02 00 '|' 3f 20 00 02 '|' 02 00 7f 00 '|' 02 01 7f 00
ls "$dir" | wc -l | sed 's/$/ seeds in '"$(echo "$dir" | sed 's/[\/&]/\\&/g')"'/'

# ---- fuzz_opts.c --------------------------------------------------------------
# Its language: steps, each a byte then its operands:
#   00 TEXT 00          pt_parse_size(TEXT)
#   01 X0..X7 FORM      pt_parse_size(print(X)), X little-endian; FORM bit7:
#                       X >>= FORM&3f; bit6: plain digits, else the largest
#                       suffix dividing X; bit2 lower case; bits0-1 "", B, iB,
#                       ib; bits3-4 leading zeros
#   02 TEXT 00          pt_parse_pct(TEXT)
#   03 N ARG.. ERRLEN   pt_parse_args of "pagepipe" and N arguments, each a
#                       token (byte < 7f, with bit7 glued to the next token's
#                       byte) or 7f TEXT 00; an error buffer of ERRLEN%200
# oseed NAME ITEM..: S TEXT | P TEXT | V "8 HEX BYTES" FORM | A ERRLEN N ARG..
oseed() {
	f=$dir/$1
	shift
	: >"$f"
	while [ $# -gt 0 ]; do
		case $1 in
		S) printf '\000%s\000' "$2" >>"$f"; shift 2 ;;
		P) printf '\002%s\000' "$2" >>"$f"; shift 2 ;;
		V) printf '\001' >>"$f"
		   for b in $2 $3; do printf "\\$(printf '%03o' "0x$b")" >>"$f"; done
		   shift 3 ;;
		A) el=$2 n=$3
		   printf "\\003\\$(printf '%03o' "$n")" >>"$f"
		   shift 3
		   i=0
		   while [ $i -lt "$n" ]; do printf '\177%s\000' "$1" >>"$f"; shift; i=$((i + 1)); done
		   printf "\\$(printf '%03o' "$el")" >>"$f" ;;
		*) echo "oseed: bad item $1" >&2; exit 1 ;;
		esac
	done
}
dir=${3:-$(dirname "$0")/corpus_opts}
mkdir -p "$dir"
oseed o01_size_strings  S 0 S 64K S 64k S 1KiB S 1kib S 1KB S 2G S 1T S 8B S 1iB S '' S K S -1 S 1.5K \
                        S ' 1' S 18446744073709551615 S 18446744073709551616 S 16777215T S 16777216T \
                        S 17179869183G S 007M S 1Kb S 1KiBB
oseed o02_size_values   V '00 00 00 00 00 00 00 00' 00 V 'ff ff ff ff ff ff ff ff' 40 \
                        V '00 00 00 00 00 01 00 00' 00 V '00 04 00 00 00 00 00 00' 05 \
                        V '00 00 10 00 00 00 00 00' 1a V 'ff ff ff ff ff ff ff ff' bf \
                        V '00 00 00 00 00 00 c0 ff' 03 V '00 00 00 40 00 00 00 00' 06
oseed o03_pct           P 0 P 100 P 101 P 007 P 0100 P 1000 P '' P -1 P 5x P 99
oseed o04_argv_run      A 100 10 -i in.dat -o out1 -L 1M -o out2 --stats -q
oseed o05_argv_long     A 100 9 --input=tcp::9000 --output=tcp:h:1 --memory=2G --block=16M \
                        --start-at=0 --resume-at=100 --progress=always --output-error=exit-nopipe \
                        --append
oseed o06_argv_errors   A 50 1 -x A 50 1 --bogus A 50 1 -m A 50 2 -m 63K A 50 2 -s 17M \
                        A 50 2 -P 101 A 50 1 --progress=sometimes A 50 1 stray A 8 2 -m junk \
                        A 0 1 -Z A 1 1 -Z A 50 2 -i '' A 50 1 --output-error=never
oseed o07_argv_help     A 100 2 -q -h A 100 1 --version A 100 2 -- -o A 100 2 -V --bogus
oseed o08_argv_outputs  A 100 130 $(i=0; while [ $i -lt 65 ]; do printf -- '-o x%d ' $i; i=$((i + 1)); done)
oseed o09_argv_default  A 100 2 -L 5K A 100 3 -L 5K -q A 100 5 -L 1K -o a --no-splice
oseed o10_argv_abbrev   A 100 4 --mem=1G --pro --out=x --output-e=warn
oseed o11_argv_clamp    A 100 4 -m 64K -s 16M A 100 4 -qa -m64K -s4K -ofile
ls "$dir" | wc -l | sed 's/$/ seeds in '"$(echo "$dir" | sed 's/[\/&]/\\&/g')"'/'

# ---- fuzz_hostile.c -------------------------------------------------------------
# Its language is in fuzz_hostile.c's top comment: a mode byte (00 stream,
# 01 packet, 02 lock words may name a live holder), then steps.  The writes
# to the ctl memory, "0c R I F V":
# R 00 header word F: 00 lock, 01 data_pages, 02 idle_head, 03 idle_count,
#   04 free_head, 05-06 fd_used, 07-08 fd_ready, 09 geom, 0a broken,
#   0b magic, 0c reaped_ns;
# R 01 ring word F: 00 bytes, 01 head, 02 tail, 03 max_usage, 04 reserved,
#   05-06 spin_budget, 07 handles[read], 08 handles[write], 09-0a sleepers,
#   0b-0c seq, 0d refs;
# R 02 slot I%64 of area I>>7, F: 00 page, 01 flags, 02 offset, 03 len;
# R 03 page I: F 00 owner, 01 next;  R 04 description I%4: F 00 holders,
#   01 side, 02 flags;  R 05 holder I%4: F 00 state, 01 pid, 02-03
#   sleepers, 04 reserved, 05 handles[F/6%4];  R 06 any word below the
#   holders (offset I<<8|F);  R 07 the slot at tail (I even) or head (I odd)
#   + (I>>1)%8 - 4 of the area in use, F as R 02 (so I 08: tail, 09: head).
# pp_reserve "1f H SIZE M" (also 5f, 9f, df), pp_commit "3f H K V" (also
#   7f, bf, ef): see fuzz_hostile.c; 0f, 2f, .. ff otherwise stay pp_fd.
# V: 00 0, 01 1, 02 +1, 03 -1, 04 ffffffff, 05 80000000, 06 7fffffff,
#   07+16k flip bit 2k, 08 B: B, 09 4096, 0a 4097, 0b 2^20, 0c 2^19,
#   0d B: +B, 0e B: -B, 0f B B B B: that word.
dir=${4:-$(dirname "$0")/corpus_hostile}
mkdir -p "$dir"
W10='00 00 0a'   # write 10 bytes
R10='02 00 0a'   # read 10 bytes
seed h01_clean_rw          00 00 00 20 63 '|' 02 00 20 63 '|' 05 00 00 '|' 04 00 04 ff
seed h02_slot_page_big     00 $W10 '|' 0c 07 08 00 0b '|' $R10 '|' $W10 '|' $R10
seed h03_slot_len          00 $W10 '|' 0c 07 08 03 0a '|' $R10
seed h04_slot_offset       00 $W10 '|' 0c 07 08 02 04 '|' 04 00 04 80
seed h05_slot_page0        00 $W10 '|' 0c 07 08 00 00 '|' 07 00 0a
seed h06_slot_flags        01 $W10 '|' 0c 07 08 01 04 '|' $R10
seed h07_geom_garbage      00 $W10 '|' 0c 00 00 09 04 '|' $R10 '|' 06 00 00 05
seed h08_geom_area         00 $W10 '|' 0c 00 00 09 47 '|' $R10 '|' $W10
seed h09_head_far          00 $W10 '|' 0c 01 00 01 0d 80 '|' $R10
seed h10_tail_back         00 $W10 '|' $R10 '|' 0c 01 00 02 03 '|' $R10 '|' 02 00 0a
seed h11_max_usage_zero    00 0c 01 00 03 00 '|' $W10 '|' 00 00 60
seed h12_max_usage_big     00 0c 01 00 03 0c '|' 00 00 7f '|' 00 00 7f '|' 02 00 7f
seed h13_reserved          00 0c 01 00 04 04 '|' $W10 '|' 08 00 20 ff
seed h14_bytes             00 $W10 '|' 0c 01 00 00 04 '|' 05 00 00 '|' $R10 '|' 05 00 00
seed h15_no_writers        00 $W10 '|' 0c 01 00 08 00 '|' $R10 '|' $R10 '|' 05 00 00
seed h16_no_readers        00 0c 01 00 07 00 '|' $W10 '|' 01 00 20 80 80
seed h17_lock_dead_owner   00 0c 00 00 00 0f f5 01 00 80 '|' $W10 '|' $R10
seed h18_lock_live_owner   02 $W10 '|' 0c 00 00 00 01 '|' $R10 '|' $R10
seed h19_lock_invalid      00 0c 00 00 00 04 '|' $W10 '|' $R10
seed h20_free_list         00 0c 00 00 04 0d 20 '|' 00 00 7f '|' 0c 00 00 04 04 '|' 00 00 7f
seed h21_idle_loop         00 00 00 64 '|' 02 00 64 '|' 0c 03 01 01 01 '|' 0c 00 00 03 04 '|' 00 00 7f '|' 02 00 7f
seed h22_page_owner        00 00 00 62 '|' 0c 03 01 00 04 '|' 0c 03 02 00 02 '|' 02 00 62 '|' 00 00 62
seed h23_data_pages_big    00 0c 00 00 01 0b '|' 00 00 7f '|' 02 00 7f
seed h24_data_pages_zero   00 $W10 '|' 0c 00 00 01 00 '|' 00 00 7f '|' 02 00 7f
seed h25_desc_side         00 0c 04 00 01 01 '|' 0a 00 00 '|' 0b 00 00 '|' 0b 01 00
seed h26_desc_holders      00 0c 04 01 00 04 '|' 0a 01 00 '|' 0b 01 00 '|' $R10
seed h27_holder_state      00 0c 05 00 00 00 '|' 0c 05 01 00 01 '|' $W10 '|' 0c 00 00 0c 00 '|' $R10
seed h28_holder_handles    00 0c 05 00 05 04 '|' 0b 01 00 '|' $R10 '|' 0b 00 00
seed h29_holder_sleepers   00 0c 05 00 02 04 '|' 0c 05 00 03 04 '|' 0b 01 00 '|' 0b 00 00
seed h30_ring_sleepers     00 0c 01 00 09 04 '|' 0c 01 00 0a 04 '|' $W10 '|' $R10 '|' 0f 00 00
seed h31_broken            00 $W10 '|' 0c 00 00 0a 01 '|' $R10 '|' 0c 00 00 0a 00 '|' $R10
seed h32_magic             00 0c 00 00 0b 04 '|' $W10 '|' 0a 00 00 '|' $R10
seed h33_race_stream       00 00 00 7f '|' 0e 12 34 3f 07 '|' 02 00 20 ff '|' 00 00 20 ff '|' 04 00 04 80 \
                              '|' 09 00 20 ff 00 '|' 07 00 20 ff '|' 0a 00 00 '|' 0b 00 01
seed h34_race_packet       01 00 00 64 '|' 0e 56 78 3f 07 '|' 02 00 20 ff '|' 00 00 50 '|' 03 00 20 ff 80 \
                              '|' 09 00 50 01 '|' 06 00 05 '|' 0f 00 00 '|' 08 00 50
seed h35_race_many_calls   00 0e 9a bc 3f 07 '|' 00 00 01 '|' 02 00 01 '|' 00 00 01 '|' 02 00 01 \
                              '|' 00 00 01 '|' 02 00 01 '|' 00 00 01 '|' 02 00 01
seed h36_splice_corrupt    00 00 00 62 '|' 0c 07 08 03 0e 10 '|' 07 00 62 '|' 09 00 62 01 '|' 09 00 62 00
seed h37_peek_corrupt      00 00 00 62 '|' 0c 07 09 02 09 '|' 04 00 04 ff '|' 04 00 04 80
seed h38_setsize_corrupt   00 00 00 64 '|' 0c 00 00 09 0d 08 '|' 06 00 06 '|' 06 01 02 '|' 02 00 64
seed h39_fd_state          00 0c 00 00 05 04 '|' 0c 00 00 07 04 '|' 0f 00 00 '|' 0f 01 00 '|' $W10 '|' 0f 00 00
seed h40_from_fd_corrupt   00 0c 07 09 00 0b '|' 08 00 62 '|' 0c 01 00 01 02 '|' 08 00 20 ff '|' 02 00 7f
seed h41_raw_header        00 $W10 '|' 0c 06 00 40 04 '|' 0c 06 10 08 04 '|' 0c 06 20 0c 0b '|' $R10 '|' $W10
seed h42_scribble_close    00 0e 01 02 3f 01 '|' 0b 00 00 '|' 0b 01 00
# The zero-copy writer (1f reserve H SIZE M, 3f commit H K V): a
# reservation open across writes, reads, corruption and a scribbler; EBUSY
# on the handle that has one, not on its dup; a close gives it back; no
# reader: EPIPE; at most half a shared pipe's capacity.
seed h43_reserve_commit    00 1f 00 80 10 27 08 '|' 00 00 0a '|' 3f 00 02 80 '|' 02 00 7f '|' 3f 00 00 00 '|' 3f 00 03 00 '|' 02 00 7f
seed h44_reserve_busy_dup  00 0a 01 00 '|' 1f 00 62 04 '|' 1f 00 62 04 '|' 1f 01 62 04 '|' 0b 01 00 '|' 3f 00 01 00 '|' 02 00 7f '|' 02 00 7f
seed h45_reserve_corrupt   00 1f 00 80 10 27 08 '|' 0c 00 00 02 04 '|' 0c 01 00 04 03 '|' 3f 00 01 00 '|' 02 00 7f '|' 1f 00 80 10 27 08 '|' 0c 05 00 04 00 '|' 3f 00 02 c0 '|' 02 00 7f
seed h46_reserve_race      00 1f 00 7f 40 '|' 0e 12 34 3f 07 '|' 00 00 20 ff '|' 3f 00 01 00 '|' 1f 00 7f 40 '|' 02 00 7f '|' 3f 00 02 80 '|' 04 00 04 80 '|' 1f 00 7f 40
seed h47_reserve_no_reader 00 1f 00 62 04 '|' 0b 00 00 '|' 3f 00 01 00 '|' 1f 00 62 04 '|' 3f 00 00 00 '|' 1f 00 62 04
seed h48_reserve_half      01 06 01 00 04 '|' 1f 00 7f 40 '|' 5f 00 7f 40 '|' 00 00 7f '|' 7f 00 01 00 '|' 02 00 7f '|' 02 00 7f
ls "$dir" | wc -l | sed 's/$/ seeds in '"$(echo "$dir" | sed 's/[\/&]/\\&/g')"'/'
