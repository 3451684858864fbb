/*
 * main.c - the pagepipe command's front end: options, signals, the
 * progress line, the closing statistics and the exit status.  The data
 * moves in the engine (engine.h: engine.c chooses and runs a data path,
 * engine_pagepipe.c or engine_kernel.c); option parsing is in opts.c,
 * opening the endpoints in endpoint.c.
 *
 * Threads: the main thread draws progress and waits for the end; one thread
 * waits for SIGINT/SIGTERM (blocked everywhere else) and ends the process
 * with a message; the engine's input and output threads move the data.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pagepipe.h>

#include "endpoint.h"
#include "engine.h"

static struct pt_opts opts;
static struct pt_engine engine;
static _Atomic bool line_drawn; /* a progress line is on the terminal */
static sigset_t stop_signals;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "1.23GiB" and the like. */
static const char *human(char *buf, size_t len, double v)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.2f%s" : "%.0f%s", v, unit[u]);
	return buf;
}

static void end_line(void)
{
	if (atomic_exchange(&line_drawn, false)) {
		ssize_t w = write(STDERR_FILENO, "\n", 1);
		(void)w;
	}
}

static void *signal_main(void *arg)
{
	(void)arg;
	int sig = 0;
	while (sigwait(&stop_signals, &sig) != 0)
		;
	end_line();
	pt_engine_detach(&engine);
	pt_msg("interrupted by %s after %llu bytes", sig == SIGINT ? "SIGINT" : "SIGTERM",
	       (unsigned long long)atomic_load(&engine.bytes_in));
	_exit(128 + sig);
}

/* ---- progress ------------------------------------------------------ */

struct progress {
	double t0, last_t;
	uint64_t last_out;
	double rate;  /* smoothed bytes per second of the slowest live output */
	int64_t total; /* the input's size (--size, or a regular file's), or -1 */
	int last_len; /* characters of the line drawn last */
};

/* " (42%)" when the input's size is known. */
static int draw_share(char *line, size_t size, const struct progress *p, uint64_t out)
{
	if (p->total <= 0)
		return 0;
	double share = (double)out * 100 / (double)p->total;
	return snprintf(line, size, " (%.0f%%)", share > 100 ? 100 : share);
}

/* "  ETA 0:01:05" while the input's size is known and data moves. */
static int draw_eta(char *line, size_t size, const struct progress *p, uint64_t out, bool final)
{
	if (p->total <= 0 || final || p->rate <= 0)
		return 0;
	double left = ((double)p->total - (double)out) / p->rate;
	long s = left > 0 ? (long)left : 0;
	return snprintf(line, size, "  ETA %ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

static uint64_t slowest_out(const struct pt_engine *e, uint64_t *fastest)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < e->n; i++) {
		uint64_t w = atomic_load(&e->outs[i].written);
		if (w > hi)
			hi = w;
		if (atomic_load(&e->outs[i].state) != PT_OUT_DROPPED && w < lo)
			lo = w;
	}
	*fastest = hi;
	return lo == UINT64_MAX ? hi : lo;
}

static void draw_progress(struct pt_engine *e, struct progress *p, bool final)
{
	char line[2048], a[32], b[32], c[32];
	double t = now_s();
	uint64_t fastest, out = slowest_out(e, &fastest);
	uint64_t in = atomic_load(&e->bytes_in);
	double dt = t - p->last_t;
	if (final) {
		p->rate = t > p->t0 ? (double)out / (t - p->t0) : 0;
	} else if (dt > 0) {
		double r = (double)(out - p->last_out) / dt;
		p->rate = p->last_t == p->t0 ? r : 0.5 * p->rate + 0.5 * r;
	}
	p->last_t = t;
	p->last_out = out;
	uint64_t buffered = pt_engine_buffered(e);
	int len = snprintf(line, sizeof line, "\rin %s  out %s", human(a, 32, (double)in),
	                   human(b, 32, (double)out));
	len += draw_share(line + len, sizeof line - (size_t)len, p, out);
	len += snprintf(line + len, sizeof line - (size_t)len, "  %s/s  buf %3d%%",
	                human(c, 32, p->rate), (int)(buffered * 100 / e->limit));
	if (e->n > 1)
		for (int i = 0; i < e->n && len < 1800; i++) {
			uint64_t w = atomic_load(&e->outs[i].written);
			int st = atomic_load(&e->outs[i].state);
			if (st == PT_OUT_DROPPED)
				len += snprintf(line + len, sizeof line - (size_t)len, "  o%d: dropped", i + 1);
			else
				len += snprintf(line + len, sizeof line - (size_t)len, "  o%d -%s", i + 1,
				                human(a, 32, (double)(fastest - w)));
			/* -T: how much of that lag waits in its spill file. */
			uint64_t done = atomic_load(&e->outs[i].unspilled);
			uint64_t disk = atomic_load(&e->outs[i].spilled) - done;
			if (disk && st != PT_OUT_DROPPED)
				len += snprintf(line + len, sizeof line - (size_t)len, " (disk %s)",
				                human(a, 32, (double)disk));
		}
	len += draw_eta(line + len, sizeof line - (size_t)len, p, out, final);
	/* Blank what is left of a longer line drawn before (a lag that shrank
	 * from "-12.5MiB" to "-0B"), or its last characters stay on screen.
	 * What is on screen is everything written, blanks included. */
	while (len < p->last_len && len < (int)sizeof line - 1)
		line[len++] = ' ';
	p->last_len = len;
	ssize_t w = write(STDERR_FILENO, line, (size_t)len);
	(void)w;
	atomic_store(&line_drawn, true);
}

static void print_stats(struct pt_engine *e, double secs)
{
	static const char *const path_words[] = {
		[PT_PATH_PAGEPIPE] = "through the buffer",
		[PT_PATH_SPLICE] = "by splice(2)",
		[PT_PATH_TEE] = "by tee(2) and splice(2)",
	};
	char a[32], b[32];
	uint64_t in = atomic_load(&e->bytes_in);
	pt_msg("%llu bytes (%s) in %.3f s, %s/s, %s%s", (unsigned long long)in,
	       human(a, 32, (double)in), secs, human(b, 32, secs > 0 ? (double)in / secs : 0),
	       path_words[e->path],
	       atomic_load(&e->input_state) == PT_INPUT_FAILED ? ", input failed" : "");
	for (int i = 0; i < e->n; i++) {
		const struct pt_output *out = &e->outs[i];
		int st = atomic_load(&out->state);
		char spill[160] = "";
		uint64_t spilled = atomic_load(&out->spilled);
		if (spilled)
			snprintf(spill, sizeof spill, "; spilled %llu bytes in %llu spell%s, at most %s on disk",
			         (unsigned long long)spilled, (unsigned long long)atomic_load(&out->spells),
			         atomic_load(&out->spells) == 1 ? "" : "s",
			         human(a, 32, (double)atomic_load(&out->spill_peak)));
		pt_msg("output %d (%s): %llu bytes, %s%s%s", i + 1, out->name,
		       (unsigned long long)atomic_load(&out->written),
		       st == PT_OUT_DONE      ? "done"
		       : st != PT_OUT_DROPPED ? "stopped"
		       : out->why[0]          ? "failed: "
		                              : "dropped: ",
		       st != PT_OUT_DROPPED ? "" : out->why[0] ? out->why : strerror(out->err), spill);
	}
}

/*
 * --help and --version: standard output must take the text, or the
 * command says why and fails, as coreutils does ("write error: No space
 * left on device" for `pagepipe --help >/dev/full`).
 */
static int flush_stdout(void)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	pt_msg("write error: %s", strerror(errno ? errno : EIO));
	return 1;
}

static int usage_error(const char *err)
{
	pt_msg("%s", err);
	fputs("Try 'pagepipe --help' for more information.\n", stderr);
	return 2;
}

/* A misspelt endpoint (a tcp: port out of range) is a usage error, found
 * before anything is opened. */
static int check_endpoints(char *err, size_t errlen)
{
	if (pt_check_endpoint(opts.input, true, err, errlen) != 0)
		return -1;
	for (int i = 0; i < opts.noutputs; i++)
		if (!opts.outputs[i].command &&
		    pt_check_endpoint(opts.outputs[i].name, false, err, errlen) != 0)
			return -1;
	return 0;
}

int main(int argc, char *argv[])
{
	char err[512];
	switch (pt_parse_args(argc, argv, &opts, err, sizeof err)) {
	case PT_HELP:
		fputs(pt_usage, stdout);
		return flush_stdout();
	case PT_VERSION:
		printf("pagepipe %s\n", pp_version());
		return flush_stdout();
	case PT_USAGE_ERROR:
		return usage_error(err);
	case PT_RUN:
		break;
	}
	if (check_endpoints(err, sizeof err) != 0)
		return usage_error(err);

	pt_hold_std_fds();
	/* EPIPE is handled per output; SIGINT/SIGTERM by signal_main alone. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	pthread_t sig_thread;
	pthread_attr_t detached;
	pthread_attr_init(&detached);
	pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&sig_thread, &detached, signal_main, NULL);
	if (rc != 0) {
		pt_msg("cannot start a thread: %s", strerror(rc));
		return 1;
	}

	double t0 = now_s();
	if (pt_engine_init(&engine, &opts) != 0)
		return 1;
	if (pt_engine_start(&engine) != 0) {
		pt_msg("cannot start a thread: %s", strerror(errno));
		return 1;
	}
	/*
	 * The line is drawn by default when stderr is a terminal, as pv and
	 * mbuffer do.  In that auto mode it first appears at the first tick
	 * (half a second in), so a run over sooner leaves the terminal as it
	 * was: nothing mixed into a short output shown on the same terminal.
	 */
	bool show = opts.progress == PT_PROGRESS_ALWAYS ||
	            (opts.progress == PT_PROGRESS_AUTO && isatty(STDERR_FILENO));
	struct progress prog = { .t0 = t0, .last_t = t0,
		                 .total = opts.size ? (int64_t)opts.size : engine.in_size };
	int idle_ticks = 0;
	while (!pt_engine_wait(&engine, 500)) {
		if (show)
			draw_progress(&engine, &prog, false);
		/* Give cached pages back once the buffer has stayed empty. */
		if (pt_engine_buffered(&engine) == 0) {
			if (++idle_ticks == 2)
				pp_pool_trim();
		} else {
			idle_ticks = 0;
		}
	}
	if (atomic_load(&engine.fatal)) {
		end_line();
		if (opts.stats && !opts.quiet)
			print_stats(&engine, now_s() - t0);
		pt_engine_detach(&engine);
		_exit(1); /* output threads may be blocked in write(2) */
	}
	pt_engine_join(&engine);
	if (show && (opts.progress == PT_PROGRESS_ALWAYS || atomic_load(&line_drawn)))
		draw_progress(&engine, &prog, true);
	end_line();
	bool ok = !atomic_load(&engine.had_error);
	if (opts.stats && !opts.quiet)
		print_stats(&engine, now_s() - t0);
	return ok ? 0 : 1;
}
