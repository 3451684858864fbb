/*
 * iceoryx.h - bench_procs.c's iceoryx channel, the zero-copy peer of its
 * 64 KiB stream and ping-pong cases: one way is an iceoryx publisher in one
 * process and a subscriber in the other, each message a loaned chunk of
 * shared memory.  The reader either sleeps in a wait set until data comes
 * (iceoryx's way to wait) or busy-polls its subscriber (never sleeps: its
 * fastest and most expensive way).  In a stream the publisher waits for a
 * slow subscriber (WAIT_FOR_CONSUMER / BLOCK_PRODUCER: nothing is dropped,
 * as nothing is in a pipe) and the reader takes each chunk in place
 * (iox_peek, iox_consume); iceoryx has no end of file, so the reader stops
 * after the stream's byte count.
 *
 * Built in only where the Makefile found the C binding's headers (Debian:
 * libiceoryx-binding-c-dev) and defined PP_BENCH_ICEORYX; otherwise
 * iox_start() prints that the case is skipped and the rest is never called.
 * iceoryx needs its daemon: iox_start() runs iox-roudi (Debian: iceoryx)
 * and waits until it says it is ready, iox_stop() ends it.
 *
 * In each process of a run: iox_join() registers with RouDi, iox_attach()
 * makes a publisher (write end) or a subscriber (read end) for a channel,
 * iox_connected() waits until RouDi has connected them, iox_read and
 * iox_write move one message as read(2)/write(2) would, and iox_leave()
 * takes it all down again.
 */
#ifndef PP_BENCH_ICEORYX_H
#define PP_BENCH_ICEORYX_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef PP_BENCH_ICEORYX
#include "iceoryx_binding_c/log.h"
#include "iceoryx_binding_c/notification_info.h"
#include "iceoryx_binding_c/publisher.h"
#include "iceoryx_binding_c/runtime.h"
#include "iceoryx_binding_c/subscriber.h"
#include "iceoryx_binding_c/wait_set.h"

#include "../test/harness/clock.h"

/* One end in this process: a publisher, or a subscriber and its wait set. */
struct iox_end {
	iox_pub_storage_t pub_storage;
	iox_sub_storage_t sub_storage;
	iox_ws_storage_t ws_storage;
	iox_pub_t pub;
	iox_sub_t sub;
	iox_ws_t ws;
	int busy;                 /* the reader busy-polls instead of waiting */
	size_t msg;               /* stream: bytes per message */
	unsigned long long left;  /* stream: bytes still to come */
	const void *held;         /* stream: the chunk iox_peek gave out */
};

/* A stream's subscriber queue, in messages: with 64 KiB messages 1 MiB in
 * flight, as much as the pagepipe grown to 1 MiB it is compared with (with
 * 1 message, a default pipe's 64 KiB, its waiting subscriber was slower:
 * 5.2 against 8.2 and 28.0 GB/s for 4 and 16 in one run). */
#ifndef IOX_STREAM_QUEUE
#define IOX_STREAM_QUEUE 16
#endif

static pid_t iox_roudi = -1;      /* the daemon iox_start ran */
static struct iox_end iox_ends[2]; /* this process's ends */
static int iox_nends;

/* Run iox-roudi, its output into an unnamed file, and wait up to 10 s for
 * "RouDi is ready"; 1 if it is, else 0 after saying why not. */
static int iox_start(void)
{
	int log = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	char buf[4096];
	if (log < 0 || null < 0) {
		printf("  iceoryx: skipped (no log file for iox-roudi)\n");
		return 0;
	}
	fflush(NULL);
	if ((iox_roudi = fork()) == 0) {
		if (dup2(log, 1) >= 0 && dup2(null, 2) >= 0)
			execlp("iox-roudi", "iox-roudi", (char *)NULL);
		_exit(127);
	}
	close(null);
	for (double end = t_now() + 10; iox_roudi > 0 && t_now() < end;) {
		int st;
		ssize_t n = pread(log, buf, sizeof buf - 1, 0);
		buf[n > 0 ? n : 0] = 0;
		if (strstr(buf, "RouDi is ready")) {
			close(log);
			return 1;
		}
		if (waitpid(iox_roudi, &st, WNOHANG) == iox_roudi) {
			printf("  iceoryx: skipped (iox-roudi %s %d: not installed, or another RouDi "
			       "runs)\n",
			       WIFEXITED(st) ? "exited" : "killed by signal",
			       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			iox_roudi = -1;
			close(log);
			return 0;
		}
		t_sleep_ms(10);
	}
	close(log);
	printf("  iceoryx: skipped (iox-roudi did not get ready within 10 s)\n");
	if (iox_roudi > 0) {
		kill(iox_roudi, SIGKILL);
		waitpid(iox_roudi, NULL, 0);
		iox_roudi = -1;
	}
	return 0;
}

static void iox_stop(void)
{
	if (iox_roudi <= 0)
		return;
	kill(iox_roudi, SIGTERM);
	waitpid(iox_roudi, NULL, 0);
	iox_roudi = -1;
}

static void iox_join(void)
{
	char name[64];
	iox_set_loglevel(Iceoryx_LogLevel_Warn);
	snprintf(name, sizeof name, "bench_procs_%d", (int)getpid());
	iox_runtime_init(name);
}

/* The write end (which 1: a publisher) or read end (0: a subscriber) of
 * channel `id` of the program run `run`; a reader that busy-polls (busy);
 * for a stream of `total` bytes in messages of msg (0: ping-pong). */
static struct iox_end *iox_attach(int run, unsigned long id, int which, int busy, size_t msg,
                                  unsigned long long total)
{
	struct iox_end *e = &iox_ends[iox_nends++];
	char instance[32], event[32];
	snprintf(instance, sizeof instance, "%d", run);
	snprintf(event, sizeof event, "%lu", id);
	memset(e, 0, sizeof *e);
	if (which) {
		iox_pub_options_t po;
		iox_pub_options_init(&po);
		if (msg)
			po.subscriberTooSlowPolicy = ConsumerTooSlowPolicy_WAIT_FOR_CONSUMER;
		e->pub = iox_pub_init(&e->pub_storage, "bench_procs", instance, event, &po);
	} else {
		iox_sub_options_t so;
		iox_sub_options_init(&so);
		so.queueCapacity = 1; /* ping-pong: one message in flight */
		if (msg) {
			so.queueCapacity = IOX_STREAM_QUEUE;
			so.queueFullPolicy = QueueFullPolicy_BLOCK_PRODUCER;
		}
		e->busy = busy;
		e->msg = msg;
		e->left = total;
		e->sub = iox_sub_init(&e->sub_storage, "bench_procs", instance, event, &so);
		e->ws = iox_ws_init(&e->ws_storage);
		iox_ws_attach_subscriber_state(e->ws, e->sub, SubscriberState_HAS_DATA, 0, NULL);
	}
	return e;
}

/* Wait up to 10 s until RouDi connected every end of this process to its
 * peer; 0, or -1. */
static int iox_connected(void)
{
	for (double end = t_now() + 10; t_now() < end; t_sleep_ms(1)) {
		int all = 1;
		for (int i = 0; i < iox_nends; i++) {
			struct iox_end *e = &iox_ends[i];
			all &= e->pub ? iox_pub_has_subscribers(e->pub)
			              : iox_sub_get_subscription_state(e->sub) == SubscribeState_SUBSCRIBED;
		}
		if (all)
			return 0;
	}
	return -1;
}

/* One message of n bytes: loan a chunk, fill it, publish it. */
static ssize_t iox_write(void *ctx, const void *buf, size_t n)
{
	struct iox_end *e = ctx;
	void *chunk;
	if (iox_pub_loan_chunk(e->pub, &chunk, (uint32_t)n) != AllocationResult_SUCCESS) {
		errno = ENOMEM;
		return -1;
	}
	memcpy(chunk, buf, n);
	iox_pub_publish_chunk(e->pub, chunk);
	return (ssize_t)n;
}

static inline void iox_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* The next message's chunk: sleeping in the wait set until it is there,
 * or asking again and again (busy). */
static const void *iox_take(struct iox_end *e)
{
	const void *chunk;
	iox_notification_info_t info[1];
	uint64_t missed;
	while (iox_sub_take_chunk(e->sub, &chunk) != ChunkReceiveResult_SUCCESS)
		if (e->busy)
			iox_relax();
		else
			iox_ws_wait(e->ws, info, 1, &missed);
	return chunk;
}

/* One message (its first n bytes). */
static ssize_t iox_read(void *ctx, void *buf, size_t n)
{
	struct iox_end *e = ctx;
	const void *chunk = iox_take(e);
	memcpy(buf, chunk, n);
	iox_sub_release_chunk(e->sub, chunk);
	return (ssize_t)n;
}

/* A stream's next message in place, as pp_peek: one segment, or 0 once
 * the stream's bytes have all come (iceoryx has no end of file). */
static ssize_t iox_peek(void *ctx, struct iovec *iov, int max)
{
	struct iox_end *e = ctx;
	(void)max;
	if (!e->left)
		return 0;
	e->held = iox_take(e);
	iov[0] = (struct iovec){ (void *)e->held, e->msg < e->left ? e->msg : (size_t)e->left };
	return 1;
}

/* Done with the message iox_peek gave: release its chunk. */
static ssize_t iox_consume(void *ctx, size_t n)
{
	struct iox_end *e = ctx;
	iox_sub_release_chunk(e->sub, e->held);
	e->held = NULL;
	e->left -= n;
	return (ssize_t)n;
}

static void iox_leave(void)
{
	for (int i = 0; i < iox_nends; i++) {
		struct iox_end *e = &iox_ends[i];
		if (e->pub)
			iox_pub_deinit(e->pub);
		if (e->ws)
			iox_ws_deinit(e->ws);
		if (e->sub)
			iox_sub_deinit(e->sub);
	}
	iox_nends = 0;
	iox_runtime_shutdown();
}

#else /* no iceoryx: nothing to run, and bench_procs.c never calls the rest */

struct iox_end;

static inline int iox_start(void)
{
	printf("  iceoryx: skipped (built without its C binding: install Debian's "
	       "libiceoryx-binding-c-dev and iceoryx, and rebuild)\n");
	return 0;
}

static inline void iox_stop(void) {}
static inline void iox_join(void) {}
static inline struct iox_end *iox_attach(int run, unsigned long id, int which, int busy,
                                         size_t msg, unsigned long long total)
{
	(void)run, (void)id, (void)which, (void)busy, (void)msg, (void)total;
	return NULL;
}
static inline int iox_connected(void)
{
	return -1;
}
static inline ssize_t iox_write(void *ctx, const void *buf, size_t n)
{
	(void)ctx, (void)buf, (void)n;
	errno = ENOSYS;
	return -1;
}
static inline ssize_t iox_read(void *ctx, void *buf, size_t n)
{
	(void)ctx, (void)buf, (void)n;
	errno = ENOSYS;
	return -1;
}
static inline ssize_t iox_peek(void *ctx, struct iovec *iov, int max)
{
	(void)ctx, (void)iov, (void)max;
	errno = ENOSYS;
	return -1;
}
static inline ssize_t iox_consume(void *ctx, size_t n)
{
	(void)ctx, (void)n;
	errno = ENOSYS;
	return -1;
}
static inline void iox_leave(void) {}

#endif
#endif
