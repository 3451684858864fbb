/*
 * engine.c - the data path of the pagepipe command.
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
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "endpoint.h"
#include "engine.h"

#define MAX_IOV 256

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Pages held now: the memory the limit bounds (a block being read holds
 * its pages before the data arrives, and a trickling source a page per
 * chunk, so this is not the byte count). */
static uint64_t pages_used(void)
{
	struct pp_pool_stats st;
	pp_pool_stats(&st);
	return (uint64_t)st.pages_in_use * PP_PAGE_SIZE;
}

uint64_t pt_engine_buffered(const struct pt_engine *e)
{
	/* Read in, not yet written by the slowest output still running. */
	uint64_t in = atomic_load(&e->bytes_in), lo = in;
	for (int i = 0; i < e->n; i++) {
		uint64_t w = atomic_load(&e->outs[i].written);
		if (atomic_load(&e->outs[i].state) == PT_OUT_RUNNING && w < lo)
			lo = w;
	}
	return in - lo;
}

/* ---- waiting for a state change ------------------------------------ */

/* Tell waiters that a state changed (see the lock rule in engine.h). */
static void notify(struct pt_engine *e)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&e->waiters)) {
		pthread_mutex_lock(&e->mu);
		pthread_cond_broadcast(&e->cv);
		pthread_mutex_unlock(&e->mu);
	}
}

/* Wait until ready(e, arg) holds (re-checked after every wakeup). */
static void wait_until(struct pt_engine *e, bool (*ready)(struct pt_engine *, void *), void *arg)
{
	if (ready(e, arg))
		return;
	pthread_mutex_lock(&e->mu);
	atomic_fetch_add(&e->waiters, 1);
	atomic_thread_fence(memory_order_seq_cst);
	while (!ready(e, arg)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&e->cv, &e->mu, &ts);
	}
	atomic_fetch_sub(&e->waiters, 1);
	pthread_mutex_unlock(&e->mu);
}

static void thread_finished(struct pt_engine *e)
{
	pthread_mutex_lock(&e->mu);
	atomic_fetch_sub(&e->running, 1);
	pthread_cond_broadcast(&e->main_cv);
	pthread_mutex_unlock(&e->mu);
}

static void set_fatal(struct pt_engine *e)
{
	atomic_store(&e->had_error, true);
	pthread_mutex_lock(&e->mu);
	atomic_store(&e->fatal, 1);
	pthread_cond_broadcast(&e->main_cv);
	pthread_mutex_unlock(&e->mu);
}

/* ---- the output threads -------------------------------------------- */

static bool live_outputs(struct pt_engine *e)
{
	for (int i = 0; i < e->n; i++)
		if (atomic_load(&e->outs[i].state) == PT_OUT_RUNNING)
			return true;
	return false;
}

/* -P: an output may write once the buffer is start_pct% full, the input
 * ended, or the input waits for room. */
static bool start_ready(struct pt_engine *e, void *arg)
{
	(void)arg;
	return atomic_load(&e->fatal) || atomic_load(&e->input_state) != PT_INPUT_READING ||
	       atomic_load(&e->input_full) ||
	       pt_engine_buffered(e) * 100 >= e->limit * (uint64_t)e->o->start_pct;
}

/* Decide what an output error means under --output-error. */
static void output_failed(struct pt_engine *e, struct pt_output *out, int err)
{
	enum pt_output_error mode = e->o->output_error;
	bool silent = err == EPIPE && (mode == PT_OE_WARN_NOPIPE || mode == PT_OE_EXIT_NOPIPE);
	out->err = err;
	if (!silent) {
		pt_msg("%s: %s", out->name, strerror(err));
		atomic_store(&e->had_error, true);
		if (mode == PT_OE_EXIT || mode == PT_OE_EXIT_NOPIPE) {
			pt_msg("%s: stopping after %llu bytes to it (--output-error=%s)", out->name,
			       (unsigned long long)atomic_load(&out->written),
			       mode == PT_OE_EXIT ? "exit" : "exit-nopipe");
			set_fatal(e);
		} else if (!e->quiet) {
			pt_msg("%s: output dropped after %llu bytes", out->name,
			       (unsigned long long)atomic_load(&out->written));
		}
	}
}

/*
 * An output is finished: close its descriptor now, so its reader sees end of
 * file when this output is done, not when the slowest sibling is.  A close
 * that fails (a delayed write error on NFS, a quota) is an output error.
 */
static void output_finished(struct pt_engine *e, struct pt_output *out, int state)
{
	if (out->own_fd && close(out->fd) != 0 && errno != EINTR && state == PT_OUT_DONE) {
		output_failed(e, out, errno);
		state = PT_OUT_DROPPED;
	}
	atomic_store(&out->state, state);
}

/* An output's descriptor failed with err: report it and drop the output. */
static void output_dropped(struct pt_engine *e, struct pt_output *out, int err)
{
	output_failed(e, out, err);
	output_finished(e, out, PT_OUT_DROPPED);
}

static void efd_signal(int efd)
{
	uint64_t one = 1;
	ssize_t w = write(efd, &one, sizeof one);
	(void)w;
}

static void efd_clear(int efd)
{
	uint64_t v;
	ssize_t r = read(efd, &v, sizeof v);
	(void)r;
}

/* Wait (up to 200 ms, so fatal errors are noticed) for fd or efd. */
static void wait_either(int fd, short events, int efd)
{
	struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = efd, .events = POLLIN } };
	if (poll(p, efd >= 0 ? 2 : 1, 200) > 0 && efd >= 0 && (p[1].revents & POLLIN))
		efd_clear(efd);
}


/* Sleep until `bytes` more may go out under the output's rate limit. */
static void rate_wait(struct pt_output *out, uint64_t t0, uint64_t sent, size_t bytes)
{
	/* The output may send rate * elapsed bytes, plus one burst of 1/20 s. */
	uint64_t burst = out->rate / 20;
	uint64_t due = sent + bytes > burst ? sent + bytes - burst : 0;
	uint64_t at = t0 + (uint64_t)((double)due * 1e9 / (double)out->rate);
	uint64_t now = now_ns();
	if (at > now) {
		struct timespec ts = { (time_t)((at - now) / 1000000000u),
			               (long)((at - now) % 1000000000u) };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
}

struct out_arg {
	struct pt_engine *e;
	struct pt_output *out;
};

static void *output_main(void *p)
{
	struct out_arg *a = p;
	struct pt_engine *e = a->e;
	struct pt_output *out = a->out;
	struct iovec iov[MAX_IOV];
	uint64_t t0 = 0;
	size_t chunk = e->o->block;
	bool gate_open = e->o->start_pct == 0;

	if (out->rate) {
		chunk = out->rate / 20;
		if (chunk < 4096)
			chunk = 4096;
		if (chunk > e->o->block)
			chunk = e->o->block;
	}
	for (;;) {
		if (atomic_load(&e->fatal))
			break;
		if (!gate_open) {
			wait_until(e, start_ready, NULL);
			gate_open = true;
		}
		ssize_t nseg = pp_peek(out->r, iov, MAX_IOV);
		if (nseg < 0) {
			if (errno == EINTR)
				continue;
			output_dropped(e, out, errno);
			break;
		}
		if (nseg == 0) { /* end of input, everything written */
			output_finished(e, out, PT_OUT_DONE);
			break;
		}
		/* Cut the segments to one chunk. */
		size_t total = 0;
		int k = 0;
		while (k < nseg && total < chunk) {
			if (total + iov[k].iov_len > chunk)
				iov[k].iov_len = chunk - total;
			total += iov[k].iov_len;
			k++;
		}
		if (out->rate) {
			if (!t0)
				t0 = now_ns();
			rate_wait(out, t0, atomic_load(&out->written), total);
		}
		ssize_t w = writev(out->fd, iov, k);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				wait_either(out->fd, POLLOUT, -1); /* made non-blocking by someone else */
				continue;
			}
			output_dropped(e, out, errno);
			break;
		}
		pp_consume(out->r, (size_t)w);
		atomic_fetch_add(&out->written, (uint64_t)w);
		notify(e);
		/* -P again once this output has run its pipe empty. */
		if (e->o->start_pct && atomic_load(&e->input_state) == PT_INPUT_READING &&
		    !(pp_events(out->r) & POLLIN))
			gate_open = false;
	}
	/* Closing the read end makes the next fan-out to it fail with EPIPE,
	 * which is how the input thread learns to drop it. */
	pp_close(out->r);
	out->r = NULL;
	notify(e);
	thread_finished(e);
	return NULL;
}

/* ---- the input thread ---------------------------------------------- */

/* The input failed: report and count its error. */
static void input_error(struct pt_engine *e, int err)
{
	e->input_err = err;
	pt_msg("%s: %s", e->in_name, strerror(err));
	atomic_store(&e->had_error, true);
	atomic_store(&e->input_state, PT_INPUT_FAILED);
}

enum input_took {
	INPUT_MOVED, /* bytes came in (counted in bytes_in) */
	INPUT_END,   /* end of input, or an input error (reported) */
	INPUT_AGAIN, /* the input has nothing right now (EAGAIN) */
	INPUT_RETRY, /* interrupted (EINTR): read again */
};

/* What a read from the input that returned n (-1 with errno) means; the
 * bytes are counted and the end or the error recorded here. */
static enum input_took input_took(struct pt_engine *e, ssize_t n)
{
	if (n > 0) {
		atomic_fetch_add(&e->bytes_in, (uint64_t)n);
		return INPUT_MOVED;
	}
	if (n == 0) {
		atomic_store(&e->input_state, PT_INPUT_ENDED);
		return INPUT_END;
	}
	if (errno == EINTR)
		return INPUT_RETRY;
	if (errno == EAGAIN)
		return INPUT_AGAIN;
	input_error(e, errno);
	return INPUT_END;
}

/* The input thread stops reading: unless the input ended or failed, no
 * output is left or an error is fatal, and the input counts as ended. */
static void input_stopped(struct pt_engine *e)
{
	int reading = PT_INPUT_READING;
	atomic_compare_exchange_strong(&e->input_state, &reading, PT_INPUT_ENDED);
}

/* Room for one more block under the memory limit (and -p once full). */
static bool room_ready(struct pt_engine *e, void *arg)
{
	(void)arg;
	if (atomic_load(&e->fatal) || !live_outputs(e))
		return true;
	uint64_t used = pages_used();
	if (used == 0)
		return true;
	bool fits = used + e->o->block + PP_PAGE_SIZE <= e->limit;
	if (atomic_load(&e->input_full)) /* -p: wait for the fill to drop below the mark */
		return fits && pt_engine_buffered(e) * 100 < e->limit * (uint64_t)e->o->resume_pct;
	return fits;
}

/* Drop the outputs whose readers are gone; false when none is left. */
static bool prune_outputs(struct pt_engine *e, struct pp_end **fed, int *nfed)
{
	int k = 0;
	for (int i = 0; i < e->n; i++) {
		struct pt_output *out = &e->outs[i];
		if (!out->fed)
			continue;
		if (pp_events(out->w) & POLLERR) {
			out->fed = false;
			pp_close(out->w);
			out->w = NULL;
			continue;
		}
		fed[k++] = out->w;
	}
	*nfed = k;
	return k > 0;
}

/* Move everything in the input pipe to every live output.  false once no
 * output is left. */
static bool distribute(struct pt_engine *e, struct pp_end **fed, int *nfed)
{
	while (pp_nread(e->in_r) > 0) {
		if (atomic_load(&e->fatal))
			return false;
		ssize_t m = pp_fanout(e->in_r, fed, *nfed, SIZE_MAX, 0);
		if (m >= 0) {
			notify(e);
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EPIPE) {
			pt_msg("fan-out: %s", strerror(errno));
			set_fatal(e);
			return false;
		}
		if (!prune_outputs(e, fed, nfed))
			return false;
	}
	return true;
}

static void *input_main(void *p)
{
	struct pt_engine *e = p;
	struct pp_end *fed[PT_MAX_OUTPUTS];
	int nfed;

	prune_outputs(e, fed, &nfed);
	while (nfed > 0 && !atomic_load(&e->fatal)) {
		if (!room_ready(e, NULL)) {
			atomic_store(&e->input_full, true);
			notify(e); /* -P: a full buffer opens the outputs */
			wait_until(e, room_ready, NULL);
			atomic_store(&e->input_full, false);
		}
		ssize_t n = pp_splice_from_fd(e->in_fd, NULL, e->in_w, e->o->block, 0);
		enum input_took took = input_took(e, n);
		if (took == INPUT_RETRY)
			continue;
		if (took == INPUT_AGAIN) { /* an input someone else made non-blocking */
			wait_either(e->in_fd, POLLIN, -1);
			continue;
		}
		if (took == INPUT_END)
			break;
		if (!distribute(e, fed, &nfed))
			break;
	}
	input_stopped(e);
	/* End of input for every output: they drain their pipes and finish. */
	for (int i = 0; i < e->n; i++) {
		if (e->outs[i].w) {
			pp_close(e->outs[i].w);
			e->outs[i].w = NULL;
		}
		e->outs[i].fed = false;
	}
	notify(e);
	thread_finished(e);
	return NULL;
}

/* ---- the kernel paths: splice and tee through chains of kernel pipes -- */

/*
 * When every descriptor is of a kind splice(2) takes and no output has a
 * rate limit or watermarks, nothing needs the data in this process's
 * memory: the kernel can move and share page references, as pv does for
 * one output, and no byte is copied here.  Each output's buffer is then a
 * chain of kernel pipes of up to 1 MiB each (the unprivileged
 * pipe-max-size), used in turn like the slots of a ring:
 *
 *   one output:  input --splice--> kp[w % n]  ...  kp[r % n] --splice--> output
 *
 *   several:     input --splice--> stage --tee-->    chain 1 ... --> output 1
 *                                        --tee-->    chain 2 ... --> output 2
 *                                        --splice--> chain N ... --> output N
 *
 * With one output the input thread fills pipe w until it holds `cap` bytes
 * or is full, publishes its byte count in filled[w % n] and moves to w + 1
 * once the output thread has finished that pipe's previous lap (w - r < n).
 *
 * With several, the input thread fills a private stage pipe, then hands the
 * whole stage to pipe w of every chain: tee(2) to all but the last output
 * still running, splice(2) to the last.  Pipe w of each chain is empty and
 * as large as the stage, so each call takes the whole stage (tee copies
 * buffer for buffer), and every output sees the same bytes; the pages are
 * shared, so the memory held is the slowest output's backlog, as on the
 * pagepipe path.  The stage is handed over when full, at the end of input,
 * or when the input has nothing more right now and some output is about
 * to run dry (while every output has pipes queued, waiting to fill the
 * stage costs nothing and keeps the rounds, hence the chains, full).
 *
 * Each output thread drains pipe r of its chain; once it has written
 * filled[r % n] bytes it marks the pipe free and moves on.  Both sides
 * splice with SPLICE_F_NONBLOCK and sleep in poll(2), so each can tell "my
 * pipe is full/empty" from "the descriptor is not ready"; they wake each
 * other through eventfds (data_efd per chain, room_efd for the input).
 *
 * Taken only when the whole memory limit can be had as kernel pipes for
 * every output (the kernel caps an unprivileged user's pipes at
 * pipe-user-pages-soft) and the descriptors fit well under RLIMIT_NOFILE;
 * otherwise the pagepipe path.
 */

#define KP_CAP (1 << 20)
#define KP_MAX 512
#define OPEN_PIPE UINT64_MAX /* filled[] of a pipe the input still fills */

/*
 * A chain's pipes are made as the input first reaches them (first lap), so
 * a short stream pays for one pipe, not for -m of them.  made: pipes that
 * exist, set by the input thread after making one; the output thread
 * touches pipe r only once r < made.  n: pipes in the ring, the target
 * until a pipe cannot be made (the kernel's pipe quota, descriptors): then
 * the input sets n = made as it reaches index made, before any index that
 * large was used, so r % n and w % n mean the same pipes to both sides
 * before and after.
 */
struct kchain {
	_Atomic int n;
	_Atomic int made;
	int fd[KP_MAX][2];
	_Atomic uint64_t filled[KP_MAX]; /* input sets, output resets to OPEN_PIPE */
	_Atomic uint64_t rseq;           /* pipe being drained (free-running) */
	int data_efd;                    /* input -> this chain's output */
};

static bool fd_ready(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };
	return poll(&p, 1, 0) > 0 && (p.revents & events);
}

static bool running(const struct pt_output *out)
{
	return atomic_load(&out->state) == PT_OUT_RUNNING;
}

/* Wake every output thread that may wait for its chain's next pipe. */
static void chains_signal(struct pt_engine *e)
{
	for (int i = 0; i < e->n; i++)
		efd_signal(e->outs[i].chain->data_efd);
}

/* End of data for every chain: pipe w, holding `last` bytes, is the last. */
static void chains_end(struct pt_engine *e, uint64_t w, uint64_t last)
{
	input_stopped(e);
	for (int i = 0; i < e->n; i++) {
		struct kchain *k = e->outs[i].chain;
		atomic_store(&k->filled[w % (uint64_t)atomic_load(&k->n)], last);
	}
	atomic_store(&e->kp_eof, true);
	chains_signal(e);
}

/* A kernel pipe of exactly cap bytes, or false. */
static bool kpipe(int fd[2], int cap)
{
	if (pipe2(fd, O_CLOEXEC) != 0) {
		fd[0] = fd[1] = -1;
		return false;
	}
	return fcntl(fd[1], F_SETPIPE_SZ, cap) == cap; /* refused, or rounded */
}

/* Make pipe w of chain k if the input reaches it for the first time; if
 * it cannot be made, the chain stops growing and wraps here (see struct
 * kchain).  Input thread, before it waits for pipe w to be free: with the
 * ring cut short, pipe w is an older pipe that may still be draining. */
static void chain_grow(struct pt_engine *e, struct kchain *k, uint64_t w)
{
	int made = atomic_load(&k->made);
	if (w == (uint64_t)made && made < atomic_load(&k->n)) {
		int *fd = k->fd[made];
		if (kpipe(fd, e->kp_cap)) {
			atomic_store(&k->made, made + 1);
		} else {
			if (fd[0] >= 0) {
				close(fd[0]);
				close(fd[1]);
			}
			atomic_store(&k->n, made);
		}
	}
}

/* The write end of pipe w of chain k (made by chain_grow). */
static int chain_wfd(struct kchain *k, uint64_t w)
{
	return k->fd[w % (uint64_t)atomic_load(&k->n)][1];
}

/* Pipe w of chain k holds `bytes` (published to its output by chains_advance). */
static void chain_fill(struct kchain *k, uint64_t w, uint64_t bytes)
{
	atomic_store(&k->filled[w % (uint64_t)atomic_load(&k->n)], bytes);
}

/* Every chain moves on to pipe w: after chain_fill of the pipes before it,
 * so that an output that sees wseq move also sees its pipe's count. */
static void chains_advance(struct pt_engine *e, uint64_t w)
{
	atomic_store(&e->kp_wseq, w);
	chains_signal(e);
}

/* Wait until pipe w of chain k is free: its output finished the lap before. */
static void chain_wait_room(struct pt_engine *e, struct pt_output *out, uint64_t w)
{
	struct kchain *k = out->chain;
	while (w - atomic_load(&k->rseq) >= (uint64_t)atomic_load(&k->n) && !atomic_load(&e->fatal) &&
	       running(out))
		wait_either(e->room_efd, POLLIN, -1);
}

enum in_step {
	IN_MOVED, /* bytes went in */
	IN_END,   /* end of input, or an input error (reported) */
	IN_FULL,  /* the pipe holds cap bytes, or is full */
	IN_IDLE,  /* the input has nothing right now */
};

/* One splice from the input into the pipe whose write end is fd and which
 * holds *held bytes (of at most e->kp_cap): the bytes go to *held and
 * bytes_in. */
static enum in_step input_splice(struct pt_engine *e, int fd, uint64_t *held)
{
	size_t want = e->kp_cap - *held < e->o->block ? e->kp_cap - *held : e->o->block;
	if (!want)
		return IN_FULL;
	ssize_t got;
	enum input_took took;
	do {
		got = splice(e->in_fd, NULL, fd, NULL, want,
		             SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE);
		took = input_took(e, got);
	} while (took == INPUT_RETRY);
	if (took == INPUT_MOVED) {
		*held += (uint64_t)got;
		return IN_MOVED;
	}
	if (took == INPUT_END)
		return IN_END;
	return fd_ready(fd, POLLOUT) ? IN_IDLE : IN_FULL;
}

static void *direct_input_main(void *p)
{
	struct pt_engine *e = p;
	struct pt_output *out = &e->outs[0];
	struct kchain *k = out->chain;
	uint64_t w = 0, in_w = 0; /* pipe being filled, bytes in it */

	while (!atomic_load(&e->fatal) && running(out)) {
		bool was_empty = in_w == 0;
		enum in_step st = input_splice(e, chain_wfd(k, w), &in_w);
		if (st == IN_MOVED) {
			if (was_empty)
				efd_signal(k->data_efd); /* the output may wait on this pipe */
			continue;
		}
		if (st == IN_END)
			break;
		if (st == IN_IDLE) {
			wait_either(e->in_fd, POLLIN, -1);
			continue;
		}
		/* This pipe is full (or holds cap bytes): hand it over, take the next. */
		chain_fill(k, w, in_w);
		chains_advance(e, ++w);
		in_w = 0;
		chain_grow(e, k, w);
		chain_wait_room(e, out, w);
	}
	chains_end(e, w, in_w);
	thread_finished(e);
	return NULL;
}

/* Some running output has at most one published pipe left to drain. */
static bool outputs_hungry(struct pt_engine *e, uint64_t w)
{
	for (int i = 0; i < e->n; i++)
		if (running(&e->outs[i]) && w - atomic_load(&e->outs[i].chain->rseq) <= 1)
			return true;
	return false;
}

/* Hand the stage's `bytes` to pipe w of every running output's chain (see
 * above).  false when no output is left or on a fatal error. */
static bool stage_hand_over(struct pt_engine *e, uint64_t w, uint64_t bytes)
{
	int last = -1;
	for (int i = 0; i < e->n; i++) {
		if (!running(&e->outs[i]))
			continue;
		chain_grow(e, e->outs[i].chain, w);
		chain_wait_room(e, &e->outs[i], w);
		if (running(&e->outs[i]))
			last = i;
	}
	if (last < 0 || atomic_load(&e->fatal))
		return false;
	for (int i = 0; i <= last; i++) {
		struct pt_output *out = &e->outs[i];
		struct kchain *k = out->chain;
		if (!running(out) && i != last)
			continue;
		int dst = chain_wfd(k, w);
		ssize_t m;
		do
			m = i == last ? splice(e->stage[0], NULL, dst, NULL, bytes,
			                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
			              : tee(e->stage[0], dst, bytes, SPLICE_F_NONBLOCK);
		while (m < 0 && errno == EINTR);
		if (m != (ssize_t)bytes) { /* cannot happen: dst is empty and as big */
			pt_msg("%s to %s moved %zd of %llu bytes: %s", i == last ? "splice" : "tee",
			       out->name, m, (unsigned long long)bytes,
			       m < 0 ? strerror(errno) : "short");
			set_fatal(e);
			return false;
		}
		chain_fill(k, w, bytes);
	}
	chains_advance(e, w + 1);
	return true;
}

static void *tee_input_main(void *p)
{
	struct pt_engine *e = p;
	uint64_t w = 0, staged = 0; /* next pipe of every chain, bytes in the stage */
	bool more = true;

	while (more && !atomic_load(&e->fatal)) {
		enum in_step st = input_splice(e, e->stage[1], &staged);
		if (st == IN_MOVED)
			continue;
		if (st == IN_END)
			break;
		if (st == IN_IDLE && (!staged || !outputs_hungry(e, w))) {
			/* The input is not ready, and nothing presses: wait for
			 * it, or for an output to move on to its next pipe. */
			wait_either(e->in_fd, POLLIN, e->room_efd);
			continue;
		}
		more = stage_hand_over(e, w, staged);
		w += more;
		staged = 0;
	}
	/* What was read before the end (or an input error) still goes out. */
	if (staged && more && !atomic_load(&e->fatal) && stage_hand_over(e, w, staged))
		w++;
	/* Pipe w's previous lap may still be draining: its filled[] is not
	 * ours to set before it is done. */
	for (int i = 0; i < e->n; i++)
		chain_wait_room(e, &e->outs[i], w);
	chains_end(e, w, 0);
	thread_finished(e);
	return NULL;
}

/* A dropped output's chain: give back the pages it holds (what the input
 * hands over after this is at most one more round). */
static void chain_discard(struct pt_engine *e, struct kchain *k)
{
	for (int i = 0; i < atomic_load(&k->made); i++)
		while (splice(k->fd[i][0], NULL, e->sink_fd, NULL, KP_CAP, SPLICE_F_NONBLOCK) > 0)
			;
}

static void *direct_output_main(void *p)
{
	struct out_arg *a = p;
	struct pt_engine *e = a->e;
	struct pt_output *out = a->out;
	struct kchain *k = out->chain;
	uint64_t r = 0, done = 0; /* pipe being drained, bytes taken from it */

	while (!atomic_load(&e->fatal)) {
		int idx = (int)(r % (uint64_t)atomic_load(&k->n));
		int rfd = idx < atomic_load(&k->made) ? k->fd[idx][0] : -1; /* -1: not made yet */
		/* filled first: the input publishes it before wseq (a handover)
		 * or eof (the end), so one of those follows once it is seen. */
		uint64_t filled = atomic_load(&k->filled[idx]);
		if (filled != OPEN_PIPE && done == filled) {
			if (atomic_load(&e->kp_wseq) == r) {
				if (atomic_load(&e->kp_eof)) { /* the last pipe, drained */
					output_finished(e, out, PT_OUT_DONE);
					break;
				}
				/* The input is between storing filled and eof. */
				wait_either(rfd, POLLIN, k->data_efd);
				continue;
			}
			atomic_store(&k->filled[idx], OPEN_PIPE);
			atomic_store(&k->rseq, ++r);
			done = 0;
			efd_signal(e->room_efd);
			continue;
		}
		if (rfd < 0) { /* the input has not reached this pipe yet */
			wait_either(-1, POLLIN, k->data_efd);
			continue;
		}
		size_t len = e->o->block;
		if (filled != OPEN_PIPE && filled - done < len)
			len = (size_t)(filled - done);
		ssize_t n = splice(rfd, NULL, out->fd, NULL, len,
		                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			done += (uint64_t)n;
			atomic_fetch_add(&out->written, (uint64_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || errno == EAGAIN) {
			if (!fd_ready(rfd, POLLIN))
				wait_either(rfd, POLLIN, k->data_efd); /* pipe empty */
			else
				wait_either(out->fd, POLLOUT, -1); /* the output is not ready */
			continue;
		}
		output_dropped(e, out, errno);
		if (e->sink_fd >= 0)
			chain_discard(e, k);
		break;
	}
	efd_signal(e->room_efd); /* the input thread may wait for room */
	thread_finished(e);
	return NULL;
}

/* Can splice(2) take this descriptor (as an input, or as an output)? */
static bool spliceable(int fd, bool output)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return false;
	if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
		return true;
	if (S_ISREG(st.st_mode))
		return !output || !(fcntl(fd, F_GETFL) & O_APPEND);
	return output && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
	       minor(st.st_rdev) == 3; /* /dev/null */
}

static void chain_free(struct kchain *k)
{
	for (int i = 0; i < atomic_load(&k->made); i++) {
		close(k->fd[i][0]);
		close(k->fd[i][1]);
	}
	if (k->data_efd >= 0)
		close(k->data_efd);
	free(k);
}

/* Everything the kernel paths made, released (setup failed, or the end). */
static void kernel_path_free(struct pt_engine *e)
{
	for (int i = 0; i < e->n; i++) {
		if (e->outs[i].chain)
			chain_free(e->outs[i].chain);
		e->outs[i].chain = NULL;
	}
	int *fds[] = { &e->stage[0], &e->stage[1], &e->room_efd, &e->sink_fd };
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}


/* A chain of up to n kernel pipes of cap bytes for an output; the first
 * is made now (so that a kernel that refuses pipes of cap bytes is seen
 * before the path is chosen), the others by chain_grow. */
static struct kchain *chain_new(int n, int cap)
{
	struct kchain *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	atomic_init(&k->n, n);
	for (int i = 0; i < n; i++)
		atomic_init(&k->filled[i], OPEN_PIPE);
	k->data_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	bool ok = k->data_efd >= 0 && kpipe(k->fd[0], cap);
	if (k->fd[0][0] >= 0)
		atomic_store(&k->made, 1); /* open: closed by chain_free, whatever else failed */
	if (!ok) {
		chain_free(k);
		return NULL;
	}
	return k;
}

/* Set up a kernel path if one applies.  true when it does. */
static bool direct_setup(struct pt_engine *e, const struct pt_opts *o)
{
	e->stage[0] = e->stage[1] = e->room_efd = e->sink_fd = -1;
	if (o->no_splice || o->start_pct || o->resume_pct != 100 || !spliceable(e->in_fd, false))
		return false;
	for (int i = 0; i < e->n; i++)
		if (e->outs[i].rate || !spliceable(e->outs[i].fd, true))
			return false;
	uint64_t per_chain = (o->memory + KP_CAP - 1) / KP_CAP;
	if (per_chain > KP_MAX)
		return false;
	/* Two descriptors a pipe, and room left for what the process opens
	 * later (none of it on these paths, but libc may). */
	struct rlimit rl;
	uint64_t fds_needed = 2 * per_chain * (uint64_t)e->n + 8;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    fds_needed + 64 > rl.rlim_cur)
		return false;
	/* A memory limit under 1 MiB is one smaller pipe a chain: a power of
	 * two at most the limit, which is what F_SETPIPE_SZ grants exactly. */
	e->kp_cap = KP_CAP;
	while ((uint64_t)e->kp_cap > o->memory && e->kp_cap > PP_PAGE_SIZE)
		e->kp_cap /= 2;
	e->room_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	bool ok = e->room_efd >= 0;
	if (ok && e->n > 1) {
		ok = kpipe(e->stage, e->kp_cap);
		e->sink_fd = ok ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
		ok = ok && e->sink_fd >= 0;
	}
	for (int i = 0; ok && i < e->n; i++)
		ok = (e->outs[i].chain = chain_new((int)per_chain, e->kp_cap)) != NULL;
	if (!ok) {
		kernel_path_free(e);
		return false;
	}
	e->direct = true;
	return true;
}

/* The smallest power-of-two byte size >= n (n <= 2^31). */
static size_t pow2_at_least(uint64_t n)
{
	size_t s = PP_PAGE_SIZE;
	while (s < n)
		s <<= 1;
	return s;
}

/* Close every pagepipe end still open (setup failed, or the end of the run). */
static void close_pipes(struct pt_engine *e)
{
	for (int i = 0; i < e->n; i++) {
		if (e->outs[i].r)
			pp_close(e->outs[i].r);
		if (e->outs[i].w)
			pp_close(e->outs[i].w);
		e->outs[i].r = e->outs[i].w = NULL;
		e->outs[i].fed = false;
	}
	if (e->in_r)
		pp_close(e->in_r);
	if (e->in_w)
		pp_close(e->in_w);
	e->in_r = e->in_w = NULL;
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

/* Set up the pagepipe path: the input pipe and one pipe per output.  0, or
 * -1 with a message printed and nothing left made. */
static int pagepipe_setup(struct pt_engine *e)
{
	const struct pt_opts *o = e->o;
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
	e->in_r = ends[0];
	e->in_w = ends[1];
	for (int i = 0; i < e->n; i++) {
		struct pt_output *out = &e->outs[i];
		if (make_pipe(ends, out_size) != 0) {
			pt_msg("cannot make a pipe for %s: %s", out->name, strerror(errno));
			close_pipes(e);
			return -1;
		}
		out->r = ends[0];
		out->w = ends[1];
		out->fed = true;
	}
	/*
	 * Keep every drained page for reuse, up to the limit: a page is mapped
	 * only when none is idle, so the pages mapped (in use + idle) never
	 * exceed the most ever in use, which the limit bounds.  Without this a
	 * backlog beyond the cache costs a fault to map and a TLB shootdown to
	 * unmap every page.  The front end trims the cache once the buffer has
	 * stayed empty, so memory is held only while data waits.
	 */
	pp_pool_setcache((long)(o->memory / PP_PAGE_SIZE));
	return 0;
}

/* How many outputs are standard output (each closes it only if alone). */
static int stdout_users(const struct pt_opts *o)
{
	int k = 0;
	for (int i = 0; i < o->noutputs; i++)
		k += !strcmp(o->outputs[i].name, "-");
	return k;
}

/* Open the outputs into e->outs (e->n of them).  0, or -1 when none could
 * be opened or a failure ends the run (--output-error=exit*). */
static int open_outputs(struct pt_engine *e)
{
	const struct pt_opts *o = e->o;
	/* Opening an output truncates it: refuse the input file itself first. */
	struct stat in_st;
	bool in_reg = fstat(e->in_fd, &in_st) == 0 && S_ISREG(in_st.st_mode);
	for (int i = 0; i < o->noutputs; i++) {
		struct pt_output *out = &e->outs[e->n];
		struct stat st;
		const char *spec = o->outputs[i].name;
		if (in_reg && strcmp(spec, "-") && strncmp(spec, "tcp:", 4) && stat(spec, &st) == 0 &&
		    st.st_dev == in_st.st_dev && st.st_ino == in_st.st_ino) {
			pt_msg("%s: input file is output file", spec);
			out->fd = -1;
		} else {
			out->fd = pt_open_output(spec, o->append, out->name, sizeof out->name);
		}
		if (out->fd < 0) {
			atomic_store(&e->had_error, true);
			if (o->output_error == PT_OE_EXIT || o->output_error == PT_OE_EXIT_NOPIPE)
				return -1;
			continue;
		}
		out->rate = o->outputs[i].rate;
		out->own_fd = strcmp(spec, "-") != 0 || stdout_users(o) == 1;
		atomic_store(&out->state, PT_OUT_RUNNING);
		e->n++;
	}
	return e->n > 0 ? 0 : -1;
}

int pt_engine_init(struct pt_engine *e, const struct pt_opts *o)
{
	/* *e starts zeroed (a static); no memset: the signal thread may
	 * already read its atomics. */
	e->o = o;
	e->limit = o->memory;
	e->quiet = o->quiet;
	e->in_fd = -1;
	e->stage[0] = e->stage[1] = e->room_efd = e->sink_fd = -1;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	pthread_cond_init(&e->main_cv, NULL);

	e->in_fd = pt_open_input(o->input, e->in_name, sizeof e->in_name, &e->in_size);
	if (e->in_fd < 0 || open_outputs(e) != 0)
		return 1;
	/* Choose the path first, then build only what it uses. */
	if (direct_setup(e, o))
		return 0;
	return pagepipe_setup(e) == 0 ? 0 : 1;
}

int pt_engine_start(struct pt_engine *e)
{
	static struct out_arg args[PT_MAX_OUTPUTS];
	atomic_store(&e->running, e->n + 1);
	for (int i = 0; i < e->n; i++) {
		args[i] = (struct out_arg){ e, &e->outs[i] };
		int rc = pthread_create(&e->outs[i].thread, NULL,
		                        e->direct ? direct_output_main : output_main, &args[i]);
		if (rc) {
			errno = rc;
			return -1;
		}
		e->outs[i].started = true;
	}
	void *(*in_main)(void *) = !e->direct ? input_main
	                           : e->n == 1 ? direct_input_main : tee_input_main;
	int rc = pthread_create(&e->in_thread, NULL, in_main, e);
	if (rc) {
		errno = rc;
		return -1;
	}
	atomic_store(&e->started, true);
	return 0;
}

bool pt_engine_wait(struct pt_engine *e, int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&e->mu);
	while (atomic_load(&e->running) > 0 && !atomic_load(&e->fatal))
		if (pthread_cond_timedwait(&e->main_cv, &e->mu, &ts) == ETIMEDOUT)
			break;
	bool done = atomic_load(&e->running) == 0 || atomic_load(&e->fatal);
	pthread_mutex_unlock(&e->mu);
	return done;
}

void pt_engine_detach(struct pt_engine *e)
{
	if (!atomic_exchange(&e->started, false))
		return;
	pthread_detach(e->in_thread);
	for (int i = 0; i < e->n; i++)
		if (e->outs[i].started)
			pthread_detach(e->outs[i].thread);
}

void pt_engine_join(struct pt_engine *e)
{
	atomic_store(&e->started, false);
	pthread_join(e->in_thread, NULL);
	for (int i = 0; i < e->n; i++)
		if (e->outs[i].started)
			pthread_join(e->outs[i].thread, NULL);
	close_pipes(e);
	kernel_path_free(e);
}
