/*
 * engine.c - the front of the pagepipe command's engine: it opens the
 * input and the outputs, chooses the data path and builds it, starts,
 * waits for and joins the threads, and owns what every path shares.
 *
 * Two data paths, a file each, with their own state (the front holds it as
 * e->state and never looks inside):
 *
 *   engine_pagepipe.c  input thread -> pagepipes, fanned out by reference
 *                      (pp_fanout) -> one output thread per output; takes
 *                      any run
 *   engine_kernel.c    chains of kernel pipes, by splice(2) for one output
 *                      and tee(2) for several; never calls libpagepipe
 *
 * The choice comes first and only the chosen path is built: the kernel
 * path when no option needs the data in this process's memory and it can
 * be had (see choose_path), otherwise the pagepipe path.
 *
 * Shared by both paths, here: the outputs and their counters and states,
 * the input's count and state, the fatal error and the exit status (all
 * read by the front end, main.c, while the threads run), and the steps
 * that mean the same on either path (an output finished or failed, what a
 * read from the input means, the input stopped, a thread finished); the
 * paths reach them through engine_path.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "endpoint.h"
#include "engine_path.h"

uint64_t pt_engine_buffered(const struct pt_engine *e)
{
	/* Read in, not yet written by the slowest output still running, less
	 * its spill file's backlog.  bytes_in is read last: every count before
	 * it is at most what it says (an output cannot write, nor the input
	 * spill, what was not read in), so in - lo cannot wrap. */
	uint64_t lo = UINT64_MAX;
	for (int i = 0; i < e->n; i++) {
		const struct pt_output *out = &e->outs[i];
		uint64_t w = atomic_load(&out->written);
		uint64_t done = atomic_load(&out->unspilled);
		uint64_t spilled = atomic_load(&out->spilled);
		w += spilled > done ? spilled - done : 0;
		if (pt_out_running(out) && w < lo)
			lo = w;
	}
	uint64_t in = atomic_load(&e->bytes_in);
	return lo < in ? in - lo : 0;
}

/* ---- what every path shares --------------------------------------- */

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

/* Decide what an output error means under --output-error; why is what the
 * message says (strerror(err) when NULL).  was is the output's state when
 * the error came: running (the usual case), done (a command's exit status
 * after it had every byte: nothing was dropped) or dropped (already said,
 * so only why is told). */
static void output_failed_why(struct pt_engine *e, struct pt_output *out, int err, const char *why,
                              int was)
{
	enum pt_output_error mode = e->o->output_error;
	bool silent = err == EPIPE && (mode == PT_OE_WARN_NOPIPE || mode == PT_OE_EXIT_NOPIPE);
	out->err = err;
	if (!silent) {
		pt_msg("%s: %s", out->name, why ? why : strerror(err));
		atomic_store(&e->had_error, true);
		if (was == PT_OUT_DROPPED)
			return;
		if (mode == PT_OE_EXIT || mode == PT_OE_EXIT_NOPIPE) {
			pt_msg("%s: stopping after %llu bytes to it (--output-error=%s)", out->name,
			       (unsigned long long)atomic_load(&out->written),
			       mode == PT_OE_EXIT ? "exit" : "exit-nopipe");
			pt_set_fatal(e);
		} else if (!e->quiet && was == PT_OUT_RUNNING) {
			pt_msg("%s: output dropped after %llu bytes", out->name,
			       (unsigned long long)atomic_load(&out->written));
		}
	}
}

static void output_failed(struct pt_engine *e, struct pt_output *out, int err)
{
	output_failed_why(e, out, err, NULL, PT_OUT_RUNNING);
}

/*
 * An output command's pipe is closed: wait for the command and judge it by
 * its exit status, as a shell pipeline would.  A command killed by SIGPIPE
 * lost its own reader: that is EPIPE, quiet under the -nopipe modes, like a
 * reader of ours going away.  Any other signal, or a status other than 0,
 * fails the output: exit status 1, and the run stops under the exit modes.
 * An output already dropped keeps its first error, and its command's
 * failure is still reported.  Returns the final state.
 */
static int command_ended(struct pt_engine *e, struct pt_output *out, int state)
{
	int st;
	pid_t r;
	do
		r = waitpid(out->pid, &st, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		output_failed_why(e, out, errno, NULL, state);
		return PT_OUT_DROPPED;
	}
	char *why = out->why;
	size_t whylen = sizeof out->why;
	int err = 0;
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE) {
		err = EPIPE;
		snprintf(why, whylen, "killed by SIGPIPE");
	} else if (WIFSIGNALED(st)) {
		err = EIO;
		snprintf(why, whylen, "killed by signal %d (%s)", WTERMSIG(st),
		         sigdescr_np(WTERMSIG(st)) ? sigdescr_np(WTERMSIG(st)) : "?");
	} else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
		err = EIO;
		snprintf(why, whylen, "exited with status %d", WEXITSTATUS(st));
	}
	if (!err) {
		why[0] = 0;
		return state;
	}
	if (state == PT_OUT_DROPPED && err == EPIPE)
		return state; /* the drop said it already */
	int first = out->err, was = state;
	enum pt_output_error mode = e->o->output_error;
	if (state == PT_OUT_DROPPED && first == EPIPE &&
	    (mode == PT_OE_WARN_NOPIPE || mode == PT_OE_EXIT_NOPIPE))
		was = PT_OUT_RUNNING; /* that drop was quiet: this is the news */
	output_failed_why(e, out, err, why, was);
	if (state == PT_OUT_DROPPED)
		out->err = first;
	return PT_OUT_DROPPED;
}
/*
 * An output is finished: close its descriptor now, so its reader sees end of
 * file when this output is done, not when the slowest sibling is.  A close
 * that fails (a delayed write error on NFS, a quota) is an output error.
 */
static void share_left(struct pt_engine *e, struct pt_output *out);

static void output_finished(struct pt_engine *e, struct pt_output *out, int state)
{
	if (out->own_fd && close(out->fd) != 0 && errno != EINTR && state == PT_OUT_DONE) {
		output_failed(e, out, errno);
		state = PT_OUT_DROPPED;
	}
	if (out->pid > 0)
		state = command_ended(e, out, state);
	atomic_store(&out->state, state);
	share_left(e, out);
}

void pt_output_done(struct pt_engine *e, struct pt_output *out)
{
	output_finished(e, out, PT_OUT_DONE);
}

void pt_output_dropped(struct pt_engine *e, struct pt_output *out, int err)
{
	output_failed(e, out, err);
	output_finished(e, out, PT_OUT_DROPPED);
}

static void efd_clear(int efd)
{
	uint64_t v;
	ssize_t r = read(efd, &v, sizeof v);
	(void)r;
}

struct timespec pt_deadline(int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

void pt_wait_fd(int fd, short events, int efd)
{
	struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = efd, .events = POLLIN } };
	if (poll(p, efd >= 0 ? 2 : 1, 200) > 0 && efd >= 0 && (p[1].revents & POLLIN))
		efd_clear(efd);
}

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

/* ---- shared positions ---------------------------------------------- */

/*
 * Outputs that write at one position: `-o - -o -`, `-o - -o /dev/stdout`
 * when standard output is a pipe, `-a -o f -o f`.  Two threads writing
 * through one open file description race for its offset: splice(2) reads
 * the offset, writes, and stores it back without the lock write(2) takes,
 * so one thread's block overwrites the other's and the file comes out
 * short (issue 14, defect 2); writes to one pipe larger than PIPE_BUF can
 * interleave inside a write; appends from two descriptions interleave in
 * an order nobody chose.  So such outputs take turns, and the result is
 * defined: the descriptor receives the input in segments, each segment
 * once per output sharing it, one after another in the order of the -o
 * options or otherwise, before the next segment (what `tee /dev/stdout`
 * gives; which of them writes a segment first is invisible, the bytes are
 * the same).  A segment is what one output caught up with the others
 * writes in one call (at most one block, -s); every other output sharing
 * the position then writes exactly those bytes, one output at a time, and
 * only when all have, may a new segment start.  An output that finishes or
 * fails leaves the share.  An output waiting for a turn has nothing to
 * write that the one writing needs (the data is the same for all), so no
 * output waits on another in a cycle.
 *
 * Shared when: the same descriptor; or kcmp(2) says the two descriptors
 * are one open file description; or, without kcmp, the same file (st_dev
 * and st_ino); and, whatever kcmp says, the same pipe or socket (separate
 * descriptions, one stream) or the same regular file opened for appending
 * by both (one end of file).  Not shared: a regular file opened twice
 * without -a (`-o f -o f`): each description has its own offset and
 * writes the whole input from the start, so the file holds the input once,
 * as with `tee f f`; nor two opens of a device (`-o /dev/null -o /dev/null`).
 *
 * Lock rule: a share's mutex guards busy and seg_end; members and n are set
 * before the threads start and read-only after.  Only the output named by
 * busy writes to the shared descriptor; it takes busy in pt_share_turn
 * and gives it back in pt_share_wrote (or on leaving) once it has written
 * up to seg_end, and broadcasts.  The waits time out every 100 ms to see a
 * fatal error.
 */
struct pt_share {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int members[PT_MAX_OUTPUTS]; /* indices in e->outs, in -o order */
	int n;
	int busy;                    /* the member writing now, or -1 (under mu) */
	uint64_t seg_end;            /* the segment's end, as an offset in the input (under mu) */
};

static struct pt_share shares[PT_MAX_OUTPUTS / 2];

/* Do descriptors a and b write at one position (see above)? */
static bool same_position(int a, int b)
{
	struct stat sa, sb;
	if (a == b)
		return true;
	if (fstat(a, &sa) != 0 || fstat(b, &sb) != 0 || sa.st_dev != sb.st_dev ||
	    sa.st_ino != sb.st_ino)
		return false;
	if (S_ISFIFO(sa.st_mode) || S_ISSOCK(sa.st_mode))
		return true;
	if (S_ISREG(sa.st_mode) && (fcntl(a, F_GETFL) & O_APPEND) && (fcntl(b, F_GETFL) & O_APPEND))
		return true;
	pid_t me = getpid();
	long k = syscall(SYS_kcmp, me, me, KCMP_FILE, a, b);
	if (k >= 0)
		return k == 0;
	return !S_ISCHR(sa.st_mode); /* no kcmp: the same file, assume the worst */
}

/* Group the outputs that write at one position (before the threads start). */
static void find_shares(struct pt_engine *e)
{
	int nshares = 0;
	for (int j = 1; j < e->n; j++) {
		struct pt_output *out = &e->outs[j];
		for (int i = 0; i < j && !out->share; i++) {
			if (!same_position(e->outs[i].fd, out->fd))
				continue;
			struct pt_share *s = e->outs[i].share;
			if (!s) {
				s = &shares[nshares++]; /* at most n/2 shares of two or more */
				pthread_mutex_init(&s->mu, NULL);
				pthread_cond_init(&s->cv, NULL);
				s->busy = -1;
				s->members[s->n++] = i;
				e->outs[i].share = s;
			}
			s->members[s->n++] = j;
			out->share = s;
		}
	}
}

/* Every running member has written the segment (under s->mu). */
static bool share_caught_up(struct pt_engine *e, struct pt_share *s)
{
	for (int k = 0; k < s->n; k++) {
		struct pt_output *o = &e->outs[s->members[k]];
		if (pt_out_running(o) && atomic_load(&o->written) < s->seg_end)
			return false;
	}
	return true;
}

uint64_t pt_share_turn(struct pt_engine *e, struct pt_output *out)
{
	struct pt_share *s = out->share;
	if (!s)
		return UINT64_MAX;
	int me = (int)(out - e->outs);
	uint64_t may = 0;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		if (atomic_load(&e->fatal))
			break;
		uint64_t w = atomic_load(&out->written);
		if (s->busy == me || (s->busy < 0 && (w < s->seg_end || share_caught_up(e, s)))) {
			s->busy = me;
			may = w < s->seg_end ? s->seg_end - w : UINT64_MAX;
			break;
		}
		struct timespec ts = pt_deadline(100);
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	pthread_mutex_unlock(&s->mu);
	return may;
}

void pt_share_wrote(struct pt_engine *e, struct pt_output *out)
{
	struct pt_share *s = out->share;
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	uint64_t w = atomic_load(&out->written);
	if (w > s->seg_end)
		s->seg_end = w; /* a new segment: the others write it next */
	if (w == s->seg_end && s->busy == (int)(out - e->outs)) {
		s->busy = -1;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
}

/* An output finished or failed: it leaves the share (after its state is
 * stored, so that share_caught_up skips it). */
static void share_left(struct pt_engine *e, struct pt_output *out)
{
	struct pt_share *s = out->share;
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	if (s->busy == (int)(out - e->outs))
		s->busy = -1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* ---- choosing and building the path -------------------------------- */

/* How many outputs are standard output (each closes it only if alone). */
static int stdout_users(const struct pt_opts *o)
{
	int k = 0;
	for (int i = 0; i < o->noutputs; i++)
		k += !o->outputs[i].command && !strcmp(o->outputs[i].name, "-");
	return k;
}

/*
 * Is output spec the input file?  Writing a file into itself never ends
 * (each block read comes back to be read again) or destroys it, so such an
 * output is refused, as cat(1) refuses it ("input file is output file").
 * A named output is checked before it is opened, since opening it would
 * truncate the input.  Standard output was opened by the shell: as cat
 * does, it is refused when it is the input's regular file and input is left
 * to read (`pagepipe < f >> f`); a file emptied by `> f`, or read to its
 * end already, is no loop.
 */
static bool output_is_input(const struct pt_engine *e, const struct stat *in_st, const char *spec)
{
	struct stat st;
	if (!strncmp(spec, "tcp:", 4))
		return false;
	if (!strcmp(spec, "-"))
		return fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
		       st.st_dev == in_st->st_dev && st.st_ino == in_st->st_ino && e->in_size > 0;
	return stat(spec, &st) == 0 && st.st_dev == in_st->st_dev && st.st_ino == in_st->st_ino;
}

/* Open the outputs into e->outs (e->n of them).  0, or -1 when none could
 * be opened or a failure ends the run (--output-error=exit*). */
static int open_outputs(struct pt_engine *e)
{
	const struct pt_opts *o = e->o;
	struct stat in_st;
	bool in_reg = fstat(e->in_fd, &in_st) == 0 && S_ISREG(in_st.st_mode);
	for (int i = 0; i < o->noutputs; i++) {
		struct pt_output *out = &e->outs[e->n];
		const char *spec = o->outputs[i].name;
		if (o->outputs[i].command) {
			out->fd = pt_open_command(spec, out->name, sizeof out->name, &out->pid);
		} else if (in_reg && output_is_input(e, &in_st, spec)) {
			pt_msg("%s: input file is output file",
			       strcmp(spec, "-") ? spec : "standard output");
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
		out->own_fd = o->outputs[i].command || strcmp(spec, "-") != 0 ||
		              stdout_users(o) == 1;
		atomic_store(&out->state, PT_OUT_RUNNING);
		e->n++;
	}
	return e->n > 0 ? 0 : -1;
}

/*
 * Choose the data path first, then build only what it uses.  The kernel
 * paths when no option needs the data in this process's memory (a rate
 * limit, watermarks, a spill directory, --no-splice) and the kernel path can be had
 * (pt_kernel_setup: the descriptors, the kernel's pipes); otherwise the
 * pagepipe path, which takes any run.  0, or -1 with a message printed.
 */
static int choose_path(struct pt_engine *e)
{
	const struct pt_opts *o = e->o;
	bool in_memory = o->no_splice || o->start_pct || o->resume_pct != 100 || o->spill_dir;
	if (!in_memory && pt_kernel_setup(e))
		return 0;
	return pt_pagepipe_setup(e);
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
	pthread_cond_init(&e->main_cv, NULL);

	e->in_fd = pt_open_input(o->input, e->in_name, sizeof e->in_name, &e->in_size);
	if (e->in_fd < 0 || open_outputs(e) != 0)
		return 1;
	find_shares(e);
	return choose_path(e) == 0 ? 0 : 1;
}

/* ---- running the path's threads ------------------------------------ */

/* Each path's threads and release, by enum pt_path. */
static const struct {
	void *(*input_main)(void *engine);
	void *(*output_main)(void *out_arg);
	void (*release)(struct pt_engine *e);
} paths[] = {
	[PT_PATH_PAGEPIPE] = { pt_pagepipe_input_main, pt_pagepipe_output_main, pt_pagepipe_release },
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
	struct timespec ts = pt_deadline(ms);
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

/* ---- the rate limit (engine_path.h) ----------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void pt_pacer_init(struct pt_pacer *pc, uint64_t rate, size_t block)
{
	pc->rate = rate;
	pc->chunk = rate / 20 ? (size_t)(rate / 20) : 1;
	if (pc->chunk > block)
		pc->chunk = block;
	pc->due = 0;
}

void pt_pacer_wait(struct pt_pacer *pc)
{
	uint64_t now = now_ns();
	if (pc->due < now)
		pc->due = now; /* no credit saved up while the output was slow */
	if (pc->due > now) {
		uint64_t d = pc->due - now;
		struct timespec ts = { (time_t)(d / 1000000000u), (long)(d % 1000000000u) };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
}

void pt_pacer_paid(struct pt_pacer *pc, size_t bytes)
{
	pc->due += (uint64_t)((double)bytes * 1e9 / (double)pc->rate);
}
