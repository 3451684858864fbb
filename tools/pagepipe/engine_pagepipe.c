/*
 * engine_pagepipe.c - the pagepipe command's pagepipe path: the data goes
 * through the library's pagepipes and pool pages, fanned out by reference.
 *
 *                       +-- out pipe 1 --> output thread 1 --> fd 1
 *   input fd --> input pipe --(pp_fanout)
 *                       +-- out pipe 2 --> output thread 2 --> fd 2
 *
 * The input thread reads a block from the input straight into pool pages
 * (pp_splice_from_fd), then moves the block to every output pipe by
 * reference (pp_fanout): one copy of the data in memory however many
 * outputs there are.  Each output thread takes its pipe's pages in place
 * (pp_peek), writes them to its descriptor with writev, and releases them
 * (pp_consume).  A page goes back to the pool when the slowest output has
 * written it, so each output lags behind on its own and the memory held is
 * the slowest output's backlog.
 *
 * Why peek + writev rather than pp_splice_to_fd: the output thread holds no
 * lock of its pipe while its descriptor blocks, so the input thread's
 * fan-out, which takes every output pipe's lock, never waits for a slow
 * output's write.
 *
 * Memory limit: the output pipes are sized to hold at least the limit, and
 * the input thread reads a block only while the pages in use (the pool's
 * count, i.e. real memory) plus that block fit under it.  -P/-p are
 * watermarks on the same count.
 *
 * Spilling (-T DIR): each output also has a spill file (spill.c).  An
 * output that falls half the limit behind stops getting blocks by fan-out;
 * the input thread appends them to its file instead, and the output thread
 * writes what its pipe still holds, then reads the file back; once it has
 * caught up it is fed by fan-out again (spill_modes, next_source: why the
 * order holds).  So a slow output no longer holds back the input and the
 * others, and memory stays under the limit.
 *
 * The engine front (engine.c) builds this path for every run the kernel
 * paths (engine_kernel.c) do not take: a rate limit, watermarks, -T,
 * --no-splice, a descriptor splice(2) does not take, or kernel pipes or
 * descriptors the kernel will not give.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <pagepipe.h>

#include "endpoint.h"
#include "engine_path.h"
#include "spill.h"

#define MAX_IOV 256

/* One output's pagepipe, and its spill file (-T). */
struct out_pipe {
	struct pp_end *r; /* read end: the output's thread */
	struct pp_end *w; /* write end: the input thread; NULL once out of the fan-out */
	/* -T only (spill.fd -1 otherwise). */
	struct pt_spill spill;
	int rfd;          /* pp_fd(r): the output thread waits on it with spill.efd */
	bool spilling;    /* input thread: new blocks go to the file, not the pipe */
	bool spill_off;   /* input thread: the file failed; never spill again */
};

/* The pagepipe path's state (the engine's e->state). */
struct pagepipe_path {
	struct pt_engine *e;
	struct pp_end *in_r, *in_w;          /* the input pipe, input thread only */
	struct out_pipe out[PT_MAX_OUTPUTS]; /* output i's pipe */
	_Atomic bool input_full;             /* input thread: waiting for the buffer to drain */
	uint64_t mem_cap;                    /* input thread only: memory the system gave
	                                      * before refusing a page, 0 until it did */
	bool said_short;                     /* input thread only: said so on stderr */

	/* Input thread only: the write ends the next fan-out feeds (the
	 * outputs still running and not spilling). */
	struct pp_end *fed[PT_MAX_OUTPUTS];
	int nfed;

	/* -T, input thread only. */
	bool spill;                          /* spill files were made */
	uint64_t disk_cap;                   /* bytes on disk at most (--spill-max, or
	                                      * what the disk held when it filled), 0: none */
	bool said_disk_short;
	uint64_t disk_want;                  /* bytes about to be spilled (disk_room) */
	int drain_wait;                      /* the output whose file must drain (file_drained) */

	/*
	 * Waits for buffer space or fill (the memory limit, watermarks).  Lock
	 * rule: mu guards nothing but the condition variable's sleep; the
	 * states waited for are atomics changed outside it.  A thread that
	 * changes a state someone may wait on does a full fence and then
	 * broadcasts if `waiters` is non-zero; a waiter increments `waiters`,
	 * fences, and re-checks before sleeping, so no wakeup is lost.  Each
	 * wait also times out after 100 ms as a second guard.
	 */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	_Atomic int waiters;
};

/* Pages held now: the memory the limit bounds (a block being read holds
 * its pages before the data arrives, and a trickling source a page per
 * chunk, so this is not the byte count). */
static uint64_t pages_used(void)
{
	struct pp_pool_stats st;
	pp_pool_stats(&st);
	return (uint64_t)st.pages_in_use * PP_PAGE_SIZE;
}

/* Close a pagepipe end if it is open, and forget it. */
static void end_close(struct pp_end **end)
{
	if (*end)
		pp_close(*end);
	*end = NULL;
}

/* ---- waiting for a state change ------------------------------------ */

/* Tell waiters that a state changed (see the lock rule above). */
static void notify(struct pagepipe_path *p)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&p->waiters)) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
}

/* Wait until ready(p) holds (re-checked after every wakeup). */
static void wait_until(struct pagepipe_path *p, bool (*ready)(struct pagepipe_path *))
{
	if (ready(p))
		return;
	pthread_mutex_lock(&p->mu);
	atomic_fetch_add(&p->waiters, 1);
	atomic_thread_fence(memory_order_seq_cst);
	while (!ready(p)) {
		struct timespec ts = pt_deadline(100);
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	}
	atomic_fetch_sub(&p->waiters, 1);
	pthread_mutex_unlock(&p->mu);
}

/* Bytes in out's spill file not yet written out (0 without -T).  Anyone. */
static uint64_t spill_backlog(const struct pt_output *out)
{
	uint64_t done = atomic_load(&out->unspilled); /* first: spilled only grows past it */
	return atomic_load(&out->spilled) - done;
}

static bool any_spill_backlog(const struct pt_engine *e)
{
	for (int i = 0; i < e->n; i++)
		if (spill_backlog(&e->outs[i]))
			return true;
	return false;
}

/* -P: an output may write once the buffer is start_pct% full, the input
 * ended, the input waits for room, or an output spills (-T keeps the
 * memory under the mark, and a spill means the buffer overflowed). */
static bool start_ready(struct pagepipe_path *p)
{
	struct pt_engine *e = p->e;
	return atomic_load(&e->fatal) || atomic_load(&e->input_state) != PT_INPUT_READING ||
	       atomic_load(&p->input_full) || any_spill_backlog(e) ||
	       pt_engine_buffered(e) * 100 >= e->limit * (uint64_t)e->o->start_pct;
}

static bool live_outputs(const struct pt_engine *e)
{
	for (int i = 0; i < e->n; i++)
		if (pt_out_running(&e->outs[i]))
			return true;
	return false;
}

/* The memory the buffer may hold: the limit, or what the system gave
 * (mem_cap) if less.  Input thread only. */
static uint64_t mem_limit(const struct pagepipe_path *p)
{
	return p->mem_cap && p->mem_cap < p->e->limit ? p->mem_cap : p->e->limit;
}

/* Room for one more block under mem_limit, and -p once full.  Input
 * thread only. */
static bool room_ready(struct pagepipe_path *p)
{
	struct pt_engine *e = p->e;
	if (atomic_load(&e->fatal) || !live_outputs(e))
		return true;
	uint64_t used = pages_used();
	if (used == 0)
		return true;
	uint64_t limit = mem_limit(p);
	bool fits = used + e->o->block + PP_PAGE_SIZE <= limit;
	if (atomic_load(&p->input_full)) /* -p: wait for the fill to drop below the mark */
		return fits && pt_engine_buffered(e) * 100 < e->limit * (uint64_t)e->o->resume_pct;
	return fits;
}

/* ---- the output threads -------------------------------------------- */

/* Drop whatever the pipe holds (the output is finished or failed). */
static void discard_backlog(struct pp_end *r)
{
	int n;
	while ((n = pp_nread(r)) > 0)
		if (pp_consume(r, (size_t)n) < 0)
			break;
}

/*
 * Where an output's next bytes are.  Without -T, always in its pipe.  With
 * -T they may be in its spill file, and the order is kept by two rules of
 * the input thread (spill_modes, distribute): while an output spills, its
 * pipe gets nothing new, and it goes back to the pipe only once the file
 * is written out (unspilled == spilled).  So the pipe's bytes come before
 * the file's when the output starts to spill, and the file's before the
 * pipe's when it stops: the output writes its pipe's bytes while there are
 * any, the file's when the pipe is empty.  `spilled` is read *before* the
 * pipe is looked at: every byte in the file up to what was read was spilled
 * before the look, so any pipe byte ahead of them was already in the pipe;
 * an empty pipe then means the file's bytes come next.  At the end of
 * input the file is looked at again: the input thread spills everything
 * before it closes the pipe.  The pipe's read end is non-blocking under
 * -T, so the thread can wait for either (its pp_fd or the spill eventfd).
 */
enum source { SRC_PIPE, SRC_FILE, SRC_NONE_YET, SRC_END, SRC_ERROR };

static enum source next_source(struct out_pipe *op, struct pt_output *out, uint64_t done,
                               struct iovec *iov, ssize_t *nseg)
{
	bool spill = op->spill.fd >= 0;
	uint64_t spilled = spill ? atomic_load(&out->spilled) : 0;
	*nseg = pp_peek(op->r, iov, MAX_IOV);
	if (*nseg > 0)
		return SRC_PIPE;
	if (*nseg < 0 && !(spill && errno == EAGAIN))
		return SRC_ERROR;
	if (*nseg == 0 && spill) /* end of input: everything spilled is counted now */
		spilled = atomic_load(&out->spilled);
	if (done < spilled)
		return SRC_FILE;
	return *nseg == 0 ? SRC_END : SRC_NONE_YET;
}

void *pt_pagepipe_output_main(void *out_arg)
{
	struct pt_out_arg *a = out_arg;
	struct pt_engine *e = a->e;
	struct pagepipe_path *p = e->state;
	struct pt_output *out = &e->outs[a->i];
	struct out_pipe *op = &p->out[a->i];
	struct iovec iov[MAX_IOV];
	struct pt_pacer pc = { 0 };
	size_t chunk = e->o->block;
	bool gate_open = e->o->start_pct == 0;
	uint64_t done = 0; /* bytes of the spill file written out (out->unspilled) */

	if (out->rate) {
		pt_pacer_init(&pc, out->rate, e->o->block);
		chunk = pc.chunk;
	}
	for (;;) {
		if (atomic_load(&e->fatal))
			break;
		if (!gate_open) {
			wait_until(p, start_ready);
			gate_open = true;
		}
		ssize_t nseg;
		enum source src = next_source(op, out, done, iov, &nseg);
		if (src == SRC_ERROR) {
			if (errno == EINTR)
				continue;
			pt_output_dropped(e, out, errno);
			break;
		}
		if (src == SRC_END) { /* end of input, everything written */
			pt_output_done(e, out);
			break;
		}
		if (src == SRC_NONE_YET) {
			pt_wait_fd(op->rfd, POLLIN, op->spill.efd);
			continue;
		}
		/* Cut the bytes to one chunk (and to the segment of a shared
		 * position, whose turn this waits for). */
		uint64_t may = pt_share_turn(e, out);
		if (!may)
			continue;
		size_t total = 0, cut = may < chunk ? (size_t)may : chunk;
		int k = 0;
		if (src == SRC_FILE) {
			uint64_t left = atomic_load(&out->spilled) - done;
			ssize_t got = pt_spill_get(&op->spill, left < cut ? (size_t)left : cut, done);
			if (got < 0) {
				pt_msg("spill file of %s: %s", out->name, strerror(errno));
				pt_output_dropped(e, out, errno);
				break;
			}
			iov[0] = (struct iovec){ op->spill.buf, (size_t)got };
			k = 1;
		}
		while (src == SRC_PIPE && k < nseg && total < cut) {
			if (total + iov[k].iov_len > cut)
				iov[k].iov_len = cut - total;
			total += iov[k].iov_len;
			k++;
		}
		if (out->rate)
			pt_pacer_wait(&pc);
		ssize_t w = writev(out->fd, iov, k);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				pt_wait_fd(out->fd, POLLOUT, -1); /* made non-blocking by someone else */
				continue;
			}
			pt_output_dropped(e, out, errno);
			break;
		}
		if (src == SRC_PIPE) {
			pp_consume(op->r, (size_t)w);
		} else {
			done += (uint64_t)w;
			atomic_store(&out->unspilled, done);
			pt_spill_done_upto(&op->spill, done, done == atomic_load(&out->spilled));
		}
		if (out->rate)
			pt_pacer_paid(&pc, (size_t)w);
		atomic_fetch_add(&out->written, (uint64_t)w);
		pt_share_wrote(e, out);
		notify(p);
		/* -P again once this output has run its buffer empty. */
		if (e->o->start_pct && atomic_load(&e->input_state) == PT_INPUT_READING &&
		    !(pp_events(op->r) & POLLIN) && !spill_backlog(out))
			gate_open = false;
	}
	/*
	 * Give the backlog's pages back now: a dropped output's pipe may hold a
	 * whole buffer, and while it does the input has no room for the
	 * survivors (the memory limit counts pages).  Then close the read end:
	 * a fan-out to it fails with EPIPE from now on, and the notify wakes
	 * the input if it waits for room, to drop the output (release the
	 * write end, and with it what a fan-out put in since the discard; and
	 * give its spill file's blocks back).
	 */
	discard_backlog(op->r);
	end_close(&op->r);
	notify(p);
	pt_thread_finished(e);
	return NULL;
}

/* ---- the input thread ---------------------------------------------- */

/* An output still fed by the input has closed its read end (it finished
 * or failed): the input thread's to drop.  Input thread only (op->w). */
static bool reader_gone(struct pagepipe_path *p)
{
	for (int i = 0; i < p->e->n; i++)
		if (p->out[i].w && (pp_events(p->out[i].w) & POLLERR))
			return true;
	return false;
}

static bool room_or_reader_gone(struct pagepipe_path *p)
{
	return reader_gone(p) || room_ready(p);
}

/* An output left: its spill file's blocks go back to the disk now (its
 * thread has stopped reading it).  If the truncate fails they go back
 * when the file is closed at the end of the run. */
static void give_back_file(struct out_pipe *op)
{
	if (op->spill.fd >= 0 && ftruncate(op->spill.fd, 0) != 0)
		return;
}

/*
 * Drop the outputs whose readers are gone, closing their write ends (the
 * last end: the pipe and the pages it still holds are freed, and a spill
 * file's blocks are given back: its thread has stopped reading it), and
 * list in fed the outputs the next fan-out feeds (the others spill).
 * false when no output is left.
 */
static bool prune_outputs(struct pagepipe_path *p)
{
	bool any = false;
	p->nfed = 0;
	for (int i = 0; i < p->e->n; i++) {
		struct out_pipe *op = &p->out[i];
		if (!op->w)
			continue;
		if (pp_events(op->w) & POLLERR) {
			end_close(&op->w);
			give_back_file(op);
			continue;
		}
		any = true;
		if (!op->spilling)
			p->fed[p->nfed++] = op->w;
	}
	return any;
}

/* ---- spilling (-T) -------------------------------------------------- */

/*
 * When an output spills, decided with each block read, before it is
 * handed out.  Each output's memory lag is what the input read (this
 * block included) and the output has neither written nor has waiting in
 * its file.  An output whose memory lag passes half the limit spills from
 * then on (this block goes to its file): its pipe keeps what it holds (at most half the
 * limit) and the other half stays for the outputs that keep up, so they
 * run on while it lags (spilling only once the buffer is full would leave
 * them no room until the laggard drained its pipe).  It goes back to
 * memory once it has written out its file and lags less than a quarter of
 * the limit (the gap keeps it from flapping).  Input thread only.
 */
static void spill_modes(struct pagepipe_path *p)
{
	struct pt_engine *e = p->e;
	for (int i = 0; i < e->n; i++) {
		struct out_pipe *op = &p->out[i];
		struct pt_output *out = &e->outs[i];
		if (!op->w || op->spill.fd < 0 || op->spill_off)
			continue;
		uint64_t backlog = spill_backlog(out);
		uint64_t gone = atomic_load(&out->written) + backlog;
		uint64_t in = atomic_load(&e->bytes_in);
		uint64_t lag = in > gone ? in - gone : 0;
		if (op->spilling && backlog == 0 && lag < e->limit / 4)
			op->spilling = false;
		else if (!op->spilling && lag > e->limit / 2) {
			op->spilling = true;
			atomic_fetch_add(&out->spells, 1);
		}
	}
}

/* Bytes waiting in the spill files of the outputs still fed.  Input thread. */
static uint64_t disk_used(const struct pagepipe_path *p)
{
	uint64_t sum = 0;
	for (int i = 0; i < p->e->n; i++)
		if (p->out[i].w)
			sum += spill_backlog(&p->e->outs[i]);
	return sum;
}

/* Room on disk for len more bytes under the cap (or nothing there to
 * wait for). */
static bool disk_room_now(struct pagepipe_path *p, size_t len)
{
	uint64_t used = disk_used(p);
	return used == 0 || used + len <= p->disk_cap;
}

/* For wait_until: room for disk_want bytes, or a reason to stop waiting. */
static bool disk_room(struct pagepipe_path *p)
{
	return atomic_load(&p->e->fatal) || reader_gone(p) || disk_room_now(p, p->disk_want);
}

/* Output drain_wait has written out its spill file (or left). */
static bool file_drained(struct pagepipe_path *p)
{
	struct out_pipe *op = &p->out[p->drain_wait];
	return atomic_load(&p->e->fatal) || !op->w || (pp_events(op->w) & POLLERR) ||
	       spill_backlog(&p->e->outs[p->drain_wait]) == 0;
}

/*
 * Append iov[0..nseg) (len bytes) to output i's spill file, waiting for
 * room under the disk cap.  A full disk (ENOSPC, EDQUOT, EFBIG) while
 * files hold a backlog caps the disk at that backlog from then on, and
 * the input waits for the outputs to read it back, as it waits for
 * memory.  Any other failure, or a full disk with nothing spilled, ends
 * spilling for the output: once it has written out its file it takes its
 * bytes from memory again, as without -T.  Returns true when the bytes
 * are in the file, false when the output must get them by fan-out (it
 * stopped spilling, or left: pruning drops it).
 */
static bool spill_to(struct pagepipe_path *p, int i, const struct iovec *iov, int nseg,
                     size_t len)
{
	struct out_pipe *op = &p->out[i];
	struct pt_output *out = &p->e->outs[i];
	for (;;) {
		if (atomic_load(&p->e->fatal) || !op->w || (pp_events(op->w) & POLLERR))
			return false;
		if (p->disk_cap && !disk_room_now(p, len)) {
			/* Woken by room, or by an output that left: pruning it
			 * gives its file back (and takes it out of disk_used). */
			p->disk_want = len;
			wait_until(p, disk_room);
			prune_outputs(p);
			continue;
		}
		uint64_t off = atomic_load(&out->spilled);
		if (pt_spill_put(&op->spill, iov, nseg, off) == 0) {
			atomic_store(&out->spilled, off + len);
			uint64_t backlog = spill_backlog(out);
			if (backlog > atomic_load(&out->spill_peak))
				atomic_store(&out->spill_peak, backlog);
			pt_spill_signal(&op->spill);
			return true;
		}
		int err = errno;
		uint64_t used = disk_used(p);
		if ((err == ENOSPC || err == EDQUOT || err == EFBIG) && used > 0) {
			if (!p->disk_cap || used < p->disk_cap)
				p->disk_cap = used;
			if (!p->said_disk_short && !p->e->quiet)
				pt_msg("spill directory %s is full (%s): spilling at most %llu bytes "
				       "from now on", p->e->o->spill_dir, strerror(err),
				       (unsigned long long)used);
			p->said_disk_short = true;
			continue;
		}
		if (!p->e->quiet)
			pt_msg("cannot spill for %s (%s): it is buffered in memory from now on",
			       out->name, strerror(err));
		op->spill_off = true;
		p->drain_wait = i;
		wait_until(p, file_drained);
		op->spilling = false;
		return false;
	}
}

/*
 * Spill the bytes at the head of the input pipe (as many as one peek
 * shows) to every output that spills.  Returns how many bytes every
 * spilling output now has in its file; the fan-out then moves exactly
 * those to the others.  0 when no output spills, -1 on a fatal error.
 */
static ssize_t spill_head(struct pagepipe_path *p)
{
	struct iovec iov[MAX_IOV];
	ssize_t nseg = -1;
	size_t len = 0;
	bool refeed = false;
	for (int i = 0; i < p->e->n; i++) {
		struct out_pipe *op = &p->out[i];
		if (!op->w || !op->spilling)
			continue;
		if (nseg < 0) {
			nseg = pp_peek(p->in_r, iov, MAX_IOV);
			if (nseg <= 0) { /* the input pipe holds data: this cannot wait */
				pt_msg("input buffer: %s", strerror(nseg ? errno : EIO));
				pt_set_fatal(p->e);
				return -1;
			}
			for (int k = 0; k < nseg; k++)
				len += iov[k].iov_len;
		}
		if (!spill_to(p, i, iov, (int)nseg, len))
			refeed = true;
	}
	if (refeed) /* an output left, or takes its bytes from memory again */
		prune_outputs(p);
	return nseg > 0 ? (ssize_t)len : 0;
}

/* Move everything in the input pipe to every live output: by fan-out to
 * the outputs in memory, to the files of those that spill.  false once no
 * output is left. */
static bool distribute(struct pagepipe_path *p)
{
	size_t ahead = 0; /* bytes at the head of the input pipe already spilled */
	while (pp_nread(p->in_r) > 0) {
		if (atomic_load(&p->e->fatal))
			return false;
		if (!ahead && p->spill) {
			ssize_t got = spill_head(p);
			if (got < 0)
				return false;
			ahead = (size_t)got;
		}
		ssize_t m;
		if (p->nfed == 0 && ahead)
			m = pp_consume(p->in_r, ahead);
		else if (p->nfed == 0)
			m = -1, errno = EPIPE; /* nobody to feed: prune says whether any is left */
		else
			m = pp_fanout(p->in_r, p->fed, p->nfed, ahead ? ahead : SIZE_MAX, 0);
		if (m >= 0) {
			ahead -= ahead ? (size_t)m : 0;
			notify(p);
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EPIPE) {
			pt_msg("fan-out: %s", strerror(errno));
			pt_set_fatal(p->e);
			return false;
		}
		if (!prune_outputs(p))
			return false;
	}
	return true;
}

/*
 * Wait for room for a block under the memory limit (and -p).  An output
 * that goes away meanwhile is dropped at once: its pipe's pages count
 * against the limit until its write end is closed, and no fan-out will
 * fail with EPIPE to tell while the input waits, so waiting for room alone
 * would wait for ever.  false once no output is left.
 */
static bool wait_for_room(struct pagepipe_path *p)
{
	bool any = true;
	atomic_store(&p->input_full, true);
	notify(p); /* -P: a full buffer opens the outputs */
	do {
		wait_until(p, room_or_reader_gone);
		any = prune_outputs(p);
	} while (any && !room_ready(p));
	atomic_store(&p->input_full, false);
	return any;
}

/*
 * -T, and no room for a whole block: how much to read instead (whole
 * pages), or 0 to wait for room.  An output that starts to spill keeps
 * the pages it holds until it has written them, at its own pace; with a
 * limit of a few blocks those can leave less than a block of room while
 * every other output waits for data, and waiting for a whole block would
 * make the spill hold back the input after all.  So read what fits.  Not
 * under -p, whose mark decides when reading resumes.
 */
static size_t spill_room(struct pagepipe_path *p)
{
	struct pt_engine *e = p->e;
	if (!p->spill || e->o->resume_pct != 100 || atomic_load(&e->fatal))
		return 0;
	uint64_t limit = mem_limit(p);
	uint64_t used = pages_used();
	if (used + 2 * PP_PAGE_SIZE > limit)
		return 0;
	return (size_t)((limit - used - PP_PAGE_SIZE) & ~(uint64_t)(PP_PAGE_SIZE - 1));
}

/*
 * The system refused the pages for a block (ENOMEM: a ulimit -v, a cgroup,
 * overcommit refused).  That is not an input error and no byte was read:
 * while the buffer holds data, the outputs will give pages back, so hold
 * the buffer under what it holds now for the rest of the run (mem_cap),
 * say so once, wait for room and read again.  Only with nothing buffered
 * can nothing make progress: then it is an error that ends the run.
 * false when the input stops.
 */
static bool memory_short(struct pagepipe_path *p)
{
	uint64_t used = pages_used();
	if (used == 0) {
		pt_msg("cannot allocate memory for the buffer: %s", strerror(ENOMEM));
		pt_set_fatal(p->e);
		return false;
	}
	p->mem_cap = used;
	if (!p->said_short && !p->e->quiet)
		pt_msg("memory is short (%s): buffering at most %llu bytes from now on, "
		       "waiting for the outputs to drain",
		       strerror(ENOMEM), (unsigned long long)used);
	p->said_short = true;
	return wait_for_room(p);
}

void *pt_pagepipe_input_main(void *engine)
{
	struct pt_engine *e = engine;
	struct pagepipe_path *p = e->state;
	while (prune_outputs(p) && !atomic_load(&e->fatal)) {
		size_t want = e->o->block;
		if (!room_ready(p)) {
			want = spill_room(p);
			if (!want && !wait_for_room(p))
				break;
			if (!want)
				want = e->o->block;
		}
		ssize_t n = pp_splice_from_fd(e->in_fd, NULL, p->in_w, want, 0);
		if (n < 0 && errno == ENOMEM) {
			if (!memory_short(p))
				break;
			continue;
		}
		enum pt_input_took took = pt_input_took(e, n);
		if (took == PT_TOOK_RETRY)
			continue;
		if (took == PT_TOOK_AGAIN) { /* an input someone else made non-blocking */
			pt_wait_fd(e->in_fd, POLLIN, -1);
			continue;
		}
		if (took == PT_TOOK_END)
			break;
		/* Decide who spills with the block in hand: before the read,
		 * which may wait for data a long time, the outputs' lags would be
		 * stale when the block comes. */
		if (p->spill) {
			spill_modes(p);
			prune_outputs(p);
		}
		if (!distribute(p))
			break;
	}
	pt_input_stopped(e);
	/* End of input for every output: they drain their pipes and finish. */
	for (int i = 0; i < e->n; i++)
		end_close(&p->out[i].w);
	notify(p);
	pt_thread_finished(e);
	return NULL;
}

/* ---- setting up and releasing ----------------------------------------- */

/* The smallest power-of-two byte size >= n (n <= 2^31). */
static size_t pow2_at_least(uint64_t n)
{
	size_t s = PP_PAGE_SIZE;
	while (s < n)
		s <<= 1;
	return s;
}

/* A pagepipe of `size` bytes in ends: 0, or -1 with errno and nothing made. */
static int make_pipe(struct pp_end *ends[2], size_t size)
{
	if (pp_pipe(ends, PP_NOSIGPIPE) != 0)
		return -1;
	if (pp_setsize(ends[1], size) < 0) {
		int err = errno;
		pp_close(ends[0]);
		pp_close(ends[1]);
		errno = err;
		return -1;
	}
	return 0;
}

/* Everything the path made, released (setup failed, or the end of the run). */
static void pagepipe_path_free(struct pagepipe_path *p)
{
	for (int i = 0; i < p->e->n; i++) {
		end_close(&p->out[i].r);
		end_close(&p->out[i].w);
		pt_spill_close(&p->out[i].spill);
	}
	end_close(&p->in_r);
	end_close(&p->in_w);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

void pt_pagepipe_release(struct pt_engine *e)
{
	pagepipe_path_free(e->state);
	e->state = NULL;
}

/* Make every pipe: 0, or -1 with a message printed. */
static int make_pipes(struct pagepipe_path *p)
{
	const struct pt_opts *o = p->e->o;
	/* Output pipes big enough for the whole limit; the input pipe for one block. */
	size_t out_size = pow2_at_least(o->memory);
	size_t in_size = pow2_at_least(o->block);
	struct pp_end *ends[2];
	if (pp_setmaxsize(out_size) < 0) {
		pt_msg("cannot allow pipes of %zu bytes: %s", out_size, strerror(errno));
		return -1;
	}
	if (make_pipe(ends, in_size) != 0) {
		pt_msg("cannot make the input pipe: %s", strerror(errno));
		return -1;
	}
	p->in_r = ends[0];
	p->in_w = ends[1];
	for (int i = 0; i < p->e->n; i++) {
		if (make_pipe(ends, out_size) != 0) {
			pt_msg("cannot make a pipe for %s: %s", p->e->outs[i].name, strerror(errno));
			return -1;
		}
		p->out[i].r = ends[0];
		p->out[i].w = ends[1];
	}
	return 0;
}

/* -T: a spill file for every output, and its pipe's read end non-blocking
 * (the output thread waits for the pipe or the file).  0, or -1 with a
 * message printed. */
static int make_spill_files(struct pagepipe_path *p)
{
	const struct pt_opts *o = p->e->o;
	for (int i = 0; i < p->e->n; i++) {
		struct out_pipe *op = &p->out[i];
		if (pt_spill_open(&op->spill, o->spill_dir, o->block) != 0) {
			pt_msg("cannot make a spill file in %s: %s", o->spill_dir, strerror(errno));
			return -1;
		}
		op->rfd = pp_fd(op->r);
		if (op->rfd < 0 || pp_setfl(op->r, PP_NONBLOCK) != 0) {
			pt_msg("cannot set up the pipe for %s: %s", p->e->outs[i].name,
			       strerror(errno));
			return -1;
		}
	}
	p->spill = true;
	p->disk_cap = o->spill_max;
	return 0;
}

int pt_pagepipe_setup(struct pt_engine *e)
{
	struct pagepipe_path *p = calloc(1, sizeof *p);
	if (!p) {
		pt_msg("cannot set up the buffer: %s", strerror(errno));
		return -1;
	}
	p->e = e;
	for (int i = 0; i < PT_MAX_OUTPUTS; i++)
		p->out[i].spill = (struct pt_spill){ .fd = -1, .efd = -1 };
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (make_pipes(p) != 0 || (e->o->spill_dir && make_spill_files(p) != 0)) {
		pagepipe_path_free(p);
		return -1;
	}
	/*
	 * Keep every drained page for reuse, up to the limit: a page is mapped
	 * only when none is idle, so the pages mapped (in use + idle) never
	 * exceed the most ever in use, which the limit bounds.  Without this a
	 * backlog beyond the cache costs a fault to map and a TLB shootdown to
	 * unmap every page.  The front end trims the cache once the buffer has
	 * stayed empty, so memory is held only while data waits.
	 */
	pp_pool_setcache((long)(e->o->memory / PP_PAGE_SIZE));
	e->state = p;
	e->path = PT_PATH_PAGEPIPE;
	return 0;
}
