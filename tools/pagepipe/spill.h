/*
 * spill.h - an output's spill file (-T DIR): where the pagepipe path puts
 * the backlog of an output that has fallen too far behind, so that the
 * input and the other outputs run on (engine_pagepipe.c decides when).
 *
 * A spill file is an unlinked temporary file in DIR: made with O_TMPFILE
 * where the filesystem has it, else made and unlinked at once, so it never
 * outlives the process, whatever ends it (SIGKILL included).  It is used
 * as a byte stream at ever-growing offsets: the input thread appends at the
 * offset it has spilled so far, the output thread reads back from the
 * offset it has written so far and punches out what it has read, so the
 * disk holds only the backlog (the file's size grows, its blocks do not).
 *
 * Owners: fd and efd are set up before the threads start and closed after
 * they end; buf and punched belong to the output thread.
 */
#ifndef PAGEPIPE_TOOL_SPILL_H
#define PAGEPIPE_TOOL_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct pt_spill {
	int fd;            /* the unlinked file, -1 when none */
	int efd;           /* eventfd: the input thread signals each block it spills */
	char *buf;         /* for reading back, made on first use (output thread) */
	size_t buf_size;
	uint64_t punched;  /* the file's blocks below this are given back (output thread) */
};

/* A spill file in dir and its eventfd; reads back go through a buffer of
 * a block, at most 256 KiB, made on the first.  0, or -1 with errno (and
 * *s holds nothing to close). */
int pt_spill_open(struct pt_spill *s, const char *dir, size_t block);

/* Close what pt_spill_open made (a no-op on one that holds nothing). */
void pt_spill_close(struct pt_spill *s);

/* Write the whole of iov[0..n) at offset off.  0, or -1 with errno (the
 * bytes past off are then undefined; nothing has been published). */
int pt_spill_put(struct pt_spill *s, const struct iovec *iov, int n, uint64_t off);

/* Read up to len bytes (at most the buffer) at offset off into s->buf.
 * The bytes read (> 0), or -1 with errno: ENOMEM (no buffer), EIO for a
 * file shorter than the offsets say. */
ssize_t pt_spill_get(struct pt_spill *s, size_t len, uint64_t off);

/* Everything below offset upto has been written out: give the disk blocks
 * back (in steps of at least 1 MiB, and when the reader has caught up).
 * Best effort: a filesystem that cannot punch holes keeps them. */
void pt_spill_done_upto(struct pt_spill *s, uint64_t upto, bool caught_up);

/* Wake the output thread that may be waiting for spilled data. */
void pt_spill_signal(struct pt_spill *s);

#endif
