/*
 * engine_path.h - inside the pagepipe command's engine: what the engine
 * front (engine.c) and the data paths offer each other.  main.c does not
 * see this; it has engine.h.
 *
 * A data path is a file with its own state (engine_pagepipe.c,
 * engine_kernel.c): a setup that builds the path (the front calls it once
 * it has chosen the path), the input thread's and the output threads' main
 * functions (the front starts them), and a release (the front calls it
 * after joining them).  The front keeps in struct pt_engine what every
 * path shares, and offers the paths the helpers below for the steps that
 * mean the same on every path: an output finished or failed, what a read
 * from the input means, the input stopped, a thread finished, a fatal
 * error, waiting for a descriptor.
 */
#ifndef PAGEPIPE_TOOL_ENGINE_PATH_H
#define PAGEPIPE_TOOL_ENGINE_PATH_H

#include <sys/types.h>
#include <time.h>

#include "engine.h"

/* An output thread's argument: the engine and the output's index. */
struct pt_out_arg {
	struct pt_engine *e;
	int i;
};

/* ---- the front, for the paths (engine.c) ---------------------------- */

static inline bool pt_out_running(const struct pt_output *out)
{
	return atomic_load(&out->state) == PT_OUT_RUNNING;
}

/* An output wrote everything up to the end of input: its descriptor is
 * closed (a close that fails drops it after all) and it is done. */
void pt_output_done(struct pt_engine *e, struct pt_output *out);

/* An output's descriptor failed with err: report it as --output-error
 * says, and drop the output. */
void pt_output_dropped(struct pt_engine *e, struct pt_output *out, int err);

enum pt_input_took {
	PT_TOOK_MOVED, /* bytes came in (counted in bytes_in) */
	PT_TOOK_END,   /* end of input, or an input error (reported) */
	PT_TOOK_AGAIN, /* the input has nothing right now (EAGAIN) */
	PT_TOOK_RETRY, /* interrupted (EINTR): read again */
};

/* What a read from the input that returned n (-1 with errno) means; the
 * bytes are counted and the end or the error recorded here. */
enum pt_input_took pt_input_took(struct pt_engine *e, ssize_t n);

/* The input thread stops reading: unless the input ended or failed (no
 * output is left, or an error is fatal), the input counts as ended. */
void pt_input_stopped(struct pt_engine *e);

/* The calling thread (input or output) is done: the front may be waiting. */
void pt_thread_finished(struct pt_engine *e);

/* An error that ends the run now (exit status 1). */
void pt_set_fatal(struct pt_engine *e);

/* Outputs writing at one position take turns (engine.c, "shared
 * positions").  pt_share_turn waits until out may write and returns how
 * many bytes it may write now (UINT64_MAX: one call's worth, whatever it
 * is; 0: a fatal error, write nothing); pt_share_wrote, after the write
 * (out->written counted; also after one that moved nothing), gives the
 * turn back once out has written the segment.  A repeated pt_share_turn
 * before pt_share_wrote keeps the turn.  No-ops for an output that shares
 * with none. */
uint64_t pt_share_turn(struct pt_engine *e, struct pt_output *out);
void pt_share_wrote(struct pt_engine *e, struct pt_output *out);

/*
 * The rate limit (-L), on every path: an output writes at most one chunk of
 * rate/20 bytes at a time (1 byte at -L 1, at most a block), and a chunk
 * starts once the bytes written before it are paid for at the rate (`due`,
 * the output thread's own).  So the first chunk goes at once, and an output
 * that was slower than its rate (a slow reader) saves up no credit for a
 * burst afterwards.  Writes of at least a page would hold back the first
 * bytes of a low rate for 4096 / rate seconds (41 s at -L 100, an hour at
 * -L 1).
 */
struct pt_pacer {
	uint64_t rate; /* bytes per second */
	size_t chunk;  /* the most written at once */
	uint64_t due;  /* ns: the bytes written so far are paid for then */
};

void pt_pacer_init(struct pt_pacer *pc, uint64_t rate, size_t block);
/* Sleep until the next chunk may start. */
void pt_pacer_wait(struct pt_pacer *pc);
/* `bytes` went out. */
void pt_pacer_paid(struct pt_pacer *pc, size_t bytes);

/* The time ms milliseconds from now, as pthread_cond_timedwait takes it. */
struct timespec pt_deadline(int ms);

/* Wait up to 200 ms (so that a fatal error is noticed) for fd to be ready
 * for events, or for the eventfd efd (-1: none) to be signalled, which
 * this clears.  fd -1 waits for efd alone. */
void pt_wait_fd(int fd, short events, int efd);

/* ---- the pagepipe path (engine_pagepipe.c) -------------------------- */

/* Build the pagepipe path (it takes any run): 0 with e->path set to
 * PT_PATH_PAGEPIPE and e->state its state, or -1 with a message printed
 * and nothing made. */
int pt_pagepipe_setup(struct pt_engine *e);
void *pt_pagepipe_input_main(void *engine);
void *pt_pagepipe_output_main(void *out_arg);
void pt_pagepipe_release(struct pt_engine *e);

/* ---- the kernel paths (engine_kernel.c) ----------------------------- */

/* Build the kernel path if the descriptors and the kernel's limits allow
 * it: true with e->path set to PT_PATH_SPLICE or PT_PATH_TEE and e->state
 * its state; false with nothing made. */
bool pt_kernel_setup(struct pt_engine *e);
void *pt_splice_input_main(void *engine);
void *pt_tee_input_main(void *engine);
void *pt_kernel_output_main(void *out_arg);
void pt_kernel_release(struct pt_engine *e);

#endif
