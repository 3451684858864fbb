/*
 * engine.h - the pagepipe command's data path, on top of libpagepipe.
 *
 * One input thread reads the input into a small pagepipe (pp_splice_from_fd)
 * and fans each block out by reference (pp_fanout) to one pagepipe per
 * output; one thread per output writes its pipe's pages to the output
 * descriptor.  When every descriptor is one splice(2) takes, the kernel
 * paths of engine_kernel.c replace the pagepipes with chains of kernel
 * pipes (splice for one output, tee for several).  The front end (main.c)
 * owns signals, progress and exit status; it reads the counters here while
 * the threads run.
 */
#ifndef PAGEPIPE_TOOL_ENGINE_H
#define PAGEPIPE_TOOL_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <pagepipe.h>

#include "opts.h"

enum pt_out_state {
	PT_OUT_RUNNING,
	PT_OUT_DONE,    /* wrote everything and reached end of input */
	PT_OUT_DROPPED, /* failed (err) and was dropped */
};

/* The data paths (the words are what --stats says). */
enum pt_path {
	PT_PATH_PAGEPIPE, /* "through the buffer": pagepipes, fan-out by reference */
	PT_PATH_SPLICE,   /* "by splice(2)": one output, a chain of kernel pipes */
	PT_PATH_TEE,      /* "by tee(2) and splice(2)": several outputs, a chain each */
};

enum pt_input_state {
	PT_INPUT_READING,
	PT_INPUT_ENDED,  /* end of input, or stopped reading: no output left, or fatal */
	PT_INPUT_FAILED, /* a read error (input_err) */
};

struct pt_output {
	/* Set before the threads start, then read-only. */
	char name[256];        /* for messages: a path, "standard output", tcp:... */
	int fd;
	bool own_fd;           /* closed by its thread when done (not a shared stdout) */
	uint64_t rate;         /* bytes per second, 0 for no limit */
	struct pp_end *r;      /* read end: owned by this output's thread */
	struct pp_end *w;      /* write end: owned by the input thread */
	pthread_t thread;
	bool started;          /* thread created */
	/* Written by the output's thread, read by anyone. */
	_Atomic uint64_t written;
	_Atomic int state;     /* enum pt_out_state */
	int err;               /* errno that dropped it; valid once state is DROPPED */
	/* Input thread only. */
	bool fed;              /* still in the fan-out list */
};

struct pt_engine {
	/* Set up by pt_engine_init, read-only while the threads run. */
	const struct pt_opts *o;
	char in_name[256];
	int in_fd;
	int64_t in_size;                 /* bytes, or -1 when unknown */
	struct pt_output outs[PT_MAX_OUTPUTS];
	int n;
	struct pp_end *in_r, *in_w;     /* the input pipe, input thread only */
	pthread_t in_thread;
	uint64_t limit;                  /* memory limit in bytes */
	enum pt_path path;               /* the data path chosen */
	void *state;                     /* the kernel path's own state (engine_kernel.c) */

	/* Counters and states, atomics: one writer each, anyone reads. */
	_Atomic uint64_t bytes_in;       /* input thread */
	_Atomic int input_state;         /* enum pt_input_state; input thread */
	int input_err;                   /* valid once input_state is PT_INPUT_FAILED */
	_Atomic bool input_full;         /* input thread: waiting for the buffer to drain */
	_Atomic int fatal;               /* set once by whoever hits an error under exit modes */
	_Atomic bool had_error;          /* some error that makes the exit status 1 */

	/*
	 * Waits for buffer space or fill (watermarks) and for the end of
	 * the run.  Lock rule: mu guards nothing but the condition variables'
	 * sleep; the states they wait for are atomics changed outside it.
	 * A thread that changes a state someone may wait on does a full fence
	 * and then broadcasts if `waiters` is non-zero; a waiter increments
	 * `waiters`, fences, and re-checks before sleeping, so no wakeup is
	 * lost.  Each wait also times out after 100 ms as a second guard.
	 */
	pthread_mutex_t mu;
	pthread_cond_t cv;               /* input and output threads */
	pthread_cond_t main_cv;          /* the front end */
	_Atomic int waiters;
	_Atomic int running;             /* threads not yet finished */
	_Atomic bool started;            /* threads made and neither joined nor detached */
	bool quiet;
};

/* Open the input and outputs and make the pipes; messages on stderr.
 * *e must be zeroed (static storage) and is set up only once.
 * Returns 0, 1 (input could not be opened, or no output could) or sets
 * had_error and goes on when only some outputs failed to open. */
int pt_engine_init(struct pt_engine *e, const struct pt_opts *o);

/* Start the threads.  0, or -1 with errno. */
int pt_engine_start(struct pt_engine *e);

/* Wait up to ms milliseconds for the run to end; true when it has (or a fatal error occurred). */
bool pt_engine_wait(struct pt_engine *e, int ms);

/* Detach the threads before ending the process with them still running
 * (a fatal error, a signal); a no-op once joined or detached. */
void pt_engine_detach(struct pt_engine *e);

/* Join the threads (after pt_engine_wait said done and fatal is 0). */
void pt_engine_join(struct pt_engine *e);

/* Bytes in the buffer: read in and not yet written by the slowest output
 * still running (the fill that -P, -p and the progress line show). */
uint64_t pt_engine_buffered(const struct pt_engine *e);

#endif
