/*
 * engine.h - the pagepipe command's engine, as the front end (main.c) sees
 * it: set it up, start it, wait for it, and read its counters while the
 * threads move the data.
 *
 * The engine's front (engine.c) opens the input and the outputs, chooses
 * one of the data paths and runs it: the pagepipe path (engine_pagepipe.c:
 * an input thread fans each block out by reference to one pagepipe per
 * output, one thread per output writes its pipe's pages) or the kernel
 * paths (engine_kernel.c: chains of kernel pipes, by splice(2) for one
 * output and tee(2) for several, when every descriptor is one splice
 * takes).  What every path shares is here, in struct pt_engine; each path
 * keeps its own state (e->state).  main.c owns signals, progress and exit
 * status; what it reads here are atomics.
 */
#ifndef PAGEPIPE_TOOL_ENGINE_H
#define PAGEPIPE_TOOL_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "opts.h"

struct pt_share;

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
	pid_t pid;             /* -x: the command fed by fd, reaped by the output's
	                        * thread once fd is closed; 0 for other outputs */
	uint64_t rate;         /* bytes per second, 0 for no limit */
	pthread_t thread;
	bool started;          /* thread created */
	struct pt_share *share; /* the outputs writing at one position with this
	                         * one (engine.c, "shared positions"), or NULL */
	/* -T: bytes that went to the output's spill file (written by the input
	 * thread), bytes of it written out (the output's thread), the most it
	 * ever held unwritten and how many times the output went to the file
	 * (the input thread); read by anyone.  All 0 without -T and on the
	 * kernel paths. */
	_Atomic uint64_t spilled;
	_Atomic uint64_t unspilled;
	_Atomic uint64_t spill_peak;
	_Atomic uint64_t spells;   /* times it started to spill (the input thread) */
	/* Written by the output's thread (on the splice path also by the input
	 * thread while it goes straight through, when the output thread has
	 * nothing to write: engine_kernel.c), read by anyone. */
	_Atomic uint64_t written;
	_Atomic int state;     /* enum pt_out_state */
	int err;               /* errno that dropped it; valid once state is DROPPED */
	char why[64];          /* -x: how its command failed ("exited with status 3"),
	                        * or empty; valid once state is DROPPED */
};

struct pt_engine {
	/* Set up by pt_engine_init, read-only while the threads run. */
	const struct pt_opts *o;
	char in_name[256];
	int in_fd;
	int64_t in_size;                 /* bytes, or -1 when unknown */
	struct pt_output outs[PT_MAX_OUTPUTS];
	int n;
	uint64_t limit;                  /* memory limit in bytes */
	bool quiet;
	enum pt_path path;               /* the data path chosen */
	void *state;                     /* that path's own state (its file's struct) */
	pthread_t in_thread;

	/* Counters and states, atomics: one writer each, anyone reads. */
	_Atomic uint64_t bytes_in;       /* input thread */
	_Atomic int input_state;         /* enum pt_input_state; input thread */
	int input_err;                   /* valid once input_state is PT_INPUT_FAILED */
	_Atomic int fatal;               /* set once by whoever hits an error under exit modes */
	_Atomic bool had_error;          /* some error that makes the exit status 1 */

	/*
	 * The end of the run: a thread that finishes, or sets fatal, does so
	 * under mu and broadcasts main_cv, on which the front end waits
	 * (pt_engine_wait).  mu guards nothing else.
	 */
	pthread_mutex_t mu;
	pthread_cond_t main_cv;
	_Atomic int running;             /* threads not yet finished */
	_Atomic bool started;            /* threads made and neither joined nor detached */
};

/* Open the input and the outputs, choose the data path and build it;
 * messages on stderr.  *e must be zeroed (static storage) and is set up
 * only once.  Returns 0, or 1 when the run cannot go on (the input could
 * not be opened, no output could, an output could not under
 * --output-error=exit*, or the path could not be built); sets had_error
 * and goes on when only some outputs failed to open. */
int pt_engine_init(struct pt_engine *e, const struct pt_opts *o);

/* Start the threads.  0, or -1 with errno. */
int pt_engine_start(struct pt_engine *e);

/* Wait up to ms milliseconds for the run to end; true when it has (or a fatal error occurred). */
bool pt_engine_wait(struct pt_engine *e, int ms);

/* Detach the threads before ending the process with them still running
 * (a fatal error, a signal); a no-op once joined or detached. */
void pt_engine_detach(struct pt_engine *e);

/* Join the threads (after pt_engine_wait said done and fatal is 0) and
 * release the path. */
void pt_engine_join(struct pt_engine *e);

/* Bytes in the buffer's memory: read in and not yet written by the
 * slowest output still running, less what waits in its spill file (-T):
 * the fill that -P, -p and the progress line show. */
uint64_t pt_engine_buffered(const struct pt_engine *e);

#endif
