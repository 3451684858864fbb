/*
 * engine.c - the pagepipe command's engine: the front, which opens the
 * endpoints, chooses the data path (the kernel paths of engine_kernel.c,
 * when they take the run) and runs its threads, and the pagepipe path:
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
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "endpoint.h"
#include "engine_path.h"

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

void pt_thread_finished(struct pt_engine *e)
{
	pthread_mutex_lock(&e->mu);
	atomic_fetch_sub(&e->running, 1);
	pthread_cond_broadcast(&e->main_cv);
	pthread_mutex_unlock(&e->mu);
}

void pt_set_fatal(struct pt_engine *e)
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
			pt_set_fatal(e);
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
void pt_output_finished(struct pt_engine *e, struct pt_output *out, int state)
{
	if (out->own_fd && close(out->fd) != 0 && errno != EINTR && state == PT_OUT_DONE) {
		output_failed(e, out, errno);
		state = PT_OUT_DROPPED;
	}
	atomic_store(&out->state, state);
}

void pt_output_dropped(struct pt_engine *e, struct pt_output *out, int err)
{
	output_failed(e, out, err);
	pt_output_finished(e, out, PT_OUT_DROPPED);
}

static void efd_clear(int efd)
{
	uint64_t v;
	ssize_t r = read(efd, &v, sizeof v);
	(void)r;
}

void pt_wait_fd(int fd, short events, int efd)
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

static void *output_main(void *p)
{
	struct pt_out_arg *a = p;
	struct pt_engine *e = a->e;
	struct pt_output *out = &e->outs[a->i];
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
			pt_output_dropped(e, out, errno);
			break;
		}
		if (nseg == 0) { /* end of input, everything written */
			pt_output_finished(e, out, PT_OUT_DONE);
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
				pt_wait_fd(out->fd, POLLOUT, -1); /* made non-blocking by someone else */
				continue;
			}
			pt_output_dropped(e, out, errno);
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
	pt_thread_finished(e);
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

enum pt_input_took pt_input_took(struct pt_engine *e, ssize_t n)
{
	if (n > 0) {
		atomic_fetch_add(&e->bytes_in, (uint64_t)n);
		return PT_TOOK_MOVED;
	}
	if (n == 0) {
		atomic_store(&e->input_state, PT_INPUT_ENDED);
		return PT_TOOK_END;
	}
	if (errno == EINTR)
		return PT_TOOK_RETRY;
	if (errno == EAGAIN)
		return PT_TOOK_AGAIN;
	input_error(e, errno);
	return PT_TOOK_END;
}

void pt_input_stopped(struct pt_engine *e)
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
			pt_set_fatal(e);
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
		enum pt_input_took took = pt_input_took(e, n);
		if (took == PT_TOOK_RETRY)
			continue;
		if (took == PT_TOOK_AGAIN) { /* an input someone else made non-blocking */
			pt_wait_fd(e->in_fd, POLLIN, -1);
			continue;
		}
		if (took == PT_TOOK_END)
			break;
		if (!distribute(e, fed, &nfed))
			break;
	}
	pt_input_stopped(e);
	/* End of input for every output: they drain their pipes and finish. */
	for (int i = 0; i < e->n; i++) {
		if (e->outs[i].w) {
			pp_close(e->outs[i].w);
			e->outs[i].w = NULL;
		}
		e->outs[i].fed = false;
	}
	notify(e);
	pt_thread_finished(e);
	return NULL;
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

/* The pagepipe path's release: after the join. */
static void pagepipe_release(struct pt_engine *e)
{
	close_pipes(e);
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

/*
 * Choose the data path first, then build only what it uses.  The kernel
 * paths when no option needs the data in this process's memory (a rate
 * limit, watermarks, --no-splice) and the kernel path can be had
 * (pt_kernel_setup: the descriptors, the kernel's pipes); otherwise the
 * pagepipe path, which takes any run.  0, or -1 with a message printed.
 */
static int choose_path(struct pt_engine *e)
{
	const struct pt_opts *o = e->o;
	bool in_memory = o->no_splice || o->start_pct || o->resume_pct != 100;
	for (int i = 0; i < e->n; i++)
		in_memory = in_memory || e->outs[i].rate;
	if (!in_memory && pt_kernel_setup(e))
		return 0;
	e->path = PT_PATH_PAGEPIPE;
	return pagepipe_setup(e);
}

int pt_engine_init(struct pt_engine *e, const struct pt_opts *o)
{
	/* *e starts zeroed (a static); no memset: the signal thread may
	 * already read its atomics. */
	e->o = o;
	e->limit = o->memory;
	e->quiet = o->quiet;
	e->in_fd = -1;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	pthread_cond_init(&e->main_cv, NULL);

	e->in_fd = pt_open_input(o->input, e->in_name, sizeof e->in_name, &e->in_size);
	if (e->in_fd < 0 || open_outputs(e) != 0)
		return 1;
	return choose_path(e) == 0 ? 0 : 1;
}

/* Each path's threads and release, by enum pt_path. */
static const struct {
	void *(*input_main)(void *engine);
	void *(*output_main)(void *out_arg);
	void (*release)(struct pt_engine *e);
} paths[] = {
	[PT_PATH_PAGEPIPE] = { input_main, output_main, pagepipe_release },
	[PT_PATH_SPLICE] = { pt_splice_input_main, pt_kernel_output_main, pt_kernel_release },
	[PT_PATH_TEE] = { pt_tee_input_main, pt_kernel_output_main, pt_kernel_release },
};

int pt_engine_start(struct pt_engine *e)
{
	static struct pt_out_arg args[PT_MAX_OUTPUTS];
	atomic_store(&e->running, e->n + 1);
	for (int i = 0; i < e->n; i++) {
		args[i] = (struct pt_out_arg){ e, i };
		int rc = pthread_create(&e->outs[i].thread, NULL, paths[e->path].output_main, &args[i]);
		if (rc) {
			errno = rc;
			return -1;
		}
		e->outs[i].started = true;
	}
	int rc = pthread_create(&e->in_thread, NULL, paths[e->path].input_main, e);
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
	paths[e->path].release(e);
}
