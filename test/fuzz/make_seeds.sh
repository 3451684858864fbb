#!/bin/sh
# make_seeds.sh - write the hand-made seed inputs of test/fuzz/corpus/.
#
# Usage: test/fuzz/make_seeds.sh [DIR]   (default: test/fuzz/corpus)
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
ls "$dir" | wc -l | sed 's/$/ seeds in '"$(echo "$dir" | sed 's/[\/&]/\\&/g')"'/'
