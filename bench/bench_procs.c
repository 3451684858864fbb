/*
 * bench_procs.c - pipes between processes: a PP_SHARED pagepipe against the
 * kernel pipe, in the same run.
 *
 * Every measurement runs in two processes made by fork(2), a writer and a
 * reader (or a pinger and an echoer), released together by a start pipe
 * once both have dropped the ends they do not use; the parent holds no end
 * while they run and only waits.  The channel between them is opened before
 * the fork, so its setup is not timed; the timed part is the transfer, from
 * the writer's first write to the reader's end of file (or the pinger's
 * first to its last round trip).  Each case alternates its variants
 * (bench.h's bench_medians: which goes first rotates), keeps the median of
 * -r runs of each, and reports every variant's ratio to the kernel pipe of
 * the same run.  The cases:
 *
 *   write 64 KiB, 64 B, 1 B: throughput.  The writer writes exactly a byte
 *     total in writes of that size; the reader reads with a 64 KiB buffer
 *     (what a streaming reader uses) until end of file.  Targets: pagepipe
 *     >= 5x, 10x and 30x the kernel pipe.  At 64 KiB also a pagepipe whose
 *     reader takes the pages in place (pp_peek, check, pp_consume; target
 *     >= 10x the kernel pipe, which has no such reader), the same with a
 *     writer that makes each block in reserved pages (pp_reserve, fill,
 *     pp_commit; target >= 10x, issue 15; see zc_write), and for context a
 *     kernel pipe grown to 1 MiB (F_SETPIPE_SZ: what a program tuning a
 *     kernel pipe gets) and a kernel pipe that the writer fills with
 *     vmsplice(2) (its pages by reference: one copy, the reader's read;
 *     issue 15 asks the zero-copy pagepipe to beat it).  The zero-copy pair
 *     also runs on a pipe grown to 1 MiB, and there with readers that sleep
 *     when idle: "reader sleeps" runs the reader with PP_SPIN_NS=0 (every
 *     wait for data a futex sleep, only a wait for the lock spinning its
 *     few microseconds first; the reader's process execs this program again,
 *     `bench_procs --sleeper`, since the library reads it when it is
 *     loaded; the writer spins as usual, as iceoryx's publisher does when
 *     it waits for a full queue), and "reader in poll" has a non-blocking
 *     reader that sleeps in poll(2) on pp_fd, as an event loop does.  Where this program was built
 *     with iceoryx's C binding, iceoryx moves the same stream in 64 KiB
 *     messages, loaned, filled by copying as the pp_reserve writer does, and
 *     read in place, its subscriber either waiting in a wait set or
 *     busy-polling; the publisher waits for a full subscriber queue (16
 *     messages: 1 MiB in flight) instead of dropping, so the pagepipe rows
 *     compared with it run on a pipe grown to 1 MiB.  Targets against the
 *     peers (issue 15): the zero-copy pair ahead of vmsplice -> read (both
 *     64 KiB pipes) and of iceoryx with its subscriber waiting, also with
 *     the reader that sleeps.
 *
 *   ping-pong 1 B: latency.  The pinger writes a byte into one pipe, the
 *     echoer reads it and writes it back through a second pipe; round
 *     trips per second.  Target: a pagepipe round trip takes <= 1/3 of the
 *     kernel pipe's (ratio kernel time / pagepipe time >= 3).  For context
 *     the same over an eventfd pair (the cheapest kernel object that wakes
 *     a process: about what any channel that puts its waiter to sleep pays,
 *     the sleep and the wake-up being the cost), the pagepipe's sleeping
 *     cases (nobody spins: both processes run with PP_SPIN_NS=0, in a copy
 *     of this program, `bench_procs --one`; readers in poll(2) on pp_fd),
 *     and, where this program was built with iceoryx's C binding, an
 *     iceoryx publisher and subscriber each way, the reader sleeping in a
 *     wait set or busy-polling (iceoryx.h; this program starts iox-roudi
 *     for it).
 *     Target: the pagepipe round trip no longer than iceoryx's busy-polling
 *     one (issue 15).
 *
 *   Context in every case (no target): a unix socketpair (SOCK_STREAM, one
 *     direction per pair), and a ring of this program's own in shared
 *     memory, a reference for what user space can reach on this machine:
 *     one writer, one reader, a 64 KiB byte ring, head and tail counters,
 *     no lock, no pages, no EOF or EPIPE machinery, no checks against a
 *     hostile peer.  "ring, spin" never sleeps (it spins, yielding the CPU
 *     every 256 pauses: the best case when both processes have a CPU, and
 *     what spinning costs when they must share one); at 64 KiB also with a
 *     reader that checks in place, as pp_peek's; in ping-pong also "ring,
 *     futex", which only sleeps on a futex word (never spins: a sleeping
 *     hand-off in user space).
 *
 *   CPU: each stream and ping-pong row says how many CPUs its two processes
 *     kept busy (each one's CPU time over its own running time, summed):
 *     2.00 is both busy all the time, as spinning and busy-polling readers
 *     are; a ping-pong whose processes sleep while they wait uses 1.00.
 *
 *   Caps: what bounds a case before the second process costs anything.
 *     At 64 KiB, memcpy of 64 KiB in one thread (cache-hot): every byte is
 *     copied at least once (twice with pp_read), so no pipe beats it.  At
 *     64 B and 1 B, pp_write alone: one process writing the same stream
 *     into a pagepipe grown to 1 MiB, drained between half-full batches
 *     untimed, shared (the writer's own per-call cost) and private (the
 *     same ring code without what sharing adds).
 *
 *   file | cat: what users run.  A program cannot write into a pagepipe, so
 *     the pagepipe side is this program as a cat: `bench_procs --cat FILE
 *     pp:FD` reads FILE 128 KiB at a time (coreutils cat's size) and writes
 *     each read whole into a pagepipe end it imports (pp_import) from a
 *     descriptor it was given across exec (pp_export), and `bench_procs
 *     --cat pp:FD - BYTES` reads it 128 KiB at a time and writes to
 *     /dev/null.  Against `cat FILE | cat > /dev/null`, coreutils cat on
 *     both sides of a kernel pipe, and, to separate the pipe from the
 *     program, the same `bench_procs --cat` pair over a kernel pipe.  The
 *     FILE is on tmpfs (/dev/shm, else $TMPDIR or /tmp: page cache, no
 *     disk); each variant is timed from the first fork to the last exit,
 *     so process start-up (fork, exec, loading) is in every figure.
 *
 *   fan-out to 4 reader processes (issue 15): a distributor process writes
 *     the stream in 64 KiB writes into a PP_SHARED pipe and pp_fanout's each
 *     block to N pipes made by pp_pipe_in in the same memory (by reference:
 *     no byte copied), each read in place by a reader process of its own;
 *     N = 1, 2 and 4, every reader getting the same bytes.  Target: fan-out
 *     to 4 takes <= 1.5x the time of fan-out to 1, with default (64 KiB)
 *     outputs and with 1 MiB ones; and the pages in use (pp_shared_stats,
 *     sampled by the distributor) are one copy: at most one output's
 *     capacity after a fan-out, however many outputs hold the block.  For
 *     context, the same distributor writing straight to one reader, and
 *     fan-out to 4 ordinary PP_SHARED pipes in memories of their own (pp_pipe:
 *     the fan-out copies each block four times); per row the CPUs busy (ours
 *     and the rest of the machine's), the distributor's and a reader's CPU
 *     per block; and caps: the distributor and a reader, each alone, and
 *     from them the least time fan-out to 4 could take on this machine's
 *     CPUs (N + 1 processes oversubscribe 2 CPUs).  See fanout_case.
 *
 * Data is checked, not assumed.  The stream's byte at position p is p % 251;
 * every reader (and the file case's last bench_procs --cat) checks the first
 * and last byte of each 4 KiB page of the stream against its position and
 * compares one page in 16 in full, however its reads or segments cut the
 * stream (bench.h's check: the same bytes for every transport), and the
 * byte count received must
 * equal the count written; each ping-pong echo is compared, and the echoer
 * must then see end of file (but on an eventfd or iceoryx, which have
 * none).  coreutils cat checks nothing: that variant only sets the time to
 * beat.  Lost or corrupted data, or a child that does not exit 0, makes the
 * program exit 1; a missed target does not (a report, not a test).
 *
 * Usage: bench_procs [-q] [-r REPS] [-c CASE]
 *   -q       quick mode (1/16 of the work, 3 repetitions): a smoke run
 *   -r REPS  repetitions per measurement (default 5)
 *   -c CASE  only the cases whose name contains CASE ("64 KiB", "1 B",
 *            "ping", "fan-out", "file")
 *   PP_BENCH_SCALE=F in the environment multiplies every amount by F;
 *   PP_BENCH_READS=1 prints, per stream run, the reads and bytes per read
 *   the reader made (how well a reader of small writes gathers).
 *   PP_SPIN_NS=0 (read by the library) turns the pagepipe's spinning off.
 *
 * Options, alternating medians, the checked stream writer and readers (also
 * over the rings here, through struct bench_io) and the MET/MISSED report
 * are bench.h's, shared with bench_core.c and bench_zerocopy.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "iceoryx.h"

#define PERIOD 251            /* the stream pattern: byte p is p % PERIOD */
#define READ_BUF (64 * KiB)   /* the streaming reader's buffer */
#define CAT_BUF (128 * KiB)   /* coreutils cat's reads and writes */
#define RING_CAP (64 * KiB)   /* the reference ring's capacity, a kernel pipe's */
#define FILE_SIZE (256 * MiB) /* the file case's file, at scale 1 */

/* ---- the reference ring in shared memory ------------------------------ */

struct ring {
	_Alignas(64) _Atomic uint64_t head; /* bytes written (the writer's line) */
	_Atomic uint32_t data_seq;          /* futex word a waiting reader sleeps on */
	_Atomic uint32_t reader_sleeps;
	_Atomic uint32_t closed;            /* the writer is done: EOF once drained */
	int spin;                           /* wait by spinning, not on futexes */
	_Alignas(64) _Atomic uint64_t tail; /* bytes read (the reader's line) */
	_Atomic uint32_t room_seq;
	_Atomic uint32_t writer_sleeps;
	_Alignas(64) unsigned char buf[RING_CAP];
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* Whether a reader (data) or the writer (!data) can go on. */
static int ring_ready(struct ring *r, int data)
{
	uint64_t h = atomic_load(&r->head), t = atomic_load(&r->tail);
	return data ? h != t || atomic_load(&r->closed) : h - t < RING_CAP;
}

/*
 * Wait until ring_ready(r, data).  Spinning: pause, and yield the CPU every
 * 256 pauses (a peer on our CPU must get to run).  Otherwise sleep on the
 * side's futex word: announce the sleep, look again, sleep; the other side
 * stores its counter, then looks for a sleeper (both sequentially
 * consistent, so one of the two sees the other) and bumps the word and
 * wakes it.
 */
static void ring_wait(struct ring *r, int data)
{
	_Atomic uint32_t *seq = data ? &r->data_seq : &r->room_seq;
	_Atomic uint32_t *sleeps = data ? &r->reader_sleeps : &r->writer_sleeps;
	for (unsigned i = 1; !ring_ready(r, data); i++) {
		if (r->spin) {
			cpu_relax();
			if (i % 256 == 0)
				sched_yield();
			continue;
		}
		uint32_t s = atomic_load(seq);
		atomic_store(sleeps, 1);
		if (!ring_ready(r, data))
			syscall(SYS_futex, seq, FUTEX_WAIT, s, NULL, NULL, 0);
		atomic_store(sleeps, 0);
	}
}

/* Wake the side that waits for data (or for room, !data) if it sleeps. */
static void ring_wake(struct ring *r, int data)
{
	_Atomic uint32_t *seq = data ? &r->data_seq : &r->room_seq;
	if (!r->spin && atomic_load(data ? &r->reader_sleeps : &r->writer_sleeps)) {
		atomic_fetch_add(seq, 1);
		syscall(SYS_futex, seq, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
}

/* As write(2) on a blocking pipe: returns when all n bytes are in. */
static ssize_t ring_write(void *ctx, const void *buf, size_t n)
{
	struct ring *r = ctx;
	const unsigned char *p = buf;
	for (size_t done = 0; done < n;) {
		ring_wait(r, 0);
		uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
		uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
		size_t k = RING_CAP - (size_t)(h - t), at = (size_t)(h % RING_CAP);
		if (k > n - done)
			k = n - done;
		size_t first = k < RING_CAP - at ? k : RING_CAP - at;
		memcpy(r->buf + at, p + done, first);
		memcpy(r->buf, p + done + first, k - first);
		atomic_store(&r->head, h + k);
		ring_wake(r, 1);
		done += k;
	}
	return (ssize_t)n;
}

/* As read(2) on a pipe: what is there, up to n; 0 at end of file. */
static ssize_t ring_read(void *ctx, void *buf, size_t n)
{
	struct ring *r = ctx;
	ring_wait(r, 1);
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
	size_t k = (size_t)(h - t), at = (size_t)(t % RING_CAP);
	if (k > n)
		k = n;
	size_t first = k < RING_CAP - at ? k : RING_CAP - at;
	memcpy(buf, r->buf + at, first);
	memcpy((unsigned char *)buf + first, r->buf, k - first);
	atomic_store(&r->tail, t + k);
	ring_wake(r, 0);
	return (ssize_t)k;
}

/* As pp_peek: the unread bytes in place (one segment, two where they wrap);
 * 0 at end of file. */
static ssize_t ring_peek(void *ctx, struct iovec *iov, int max)
{
	struct ring *r = ctx;
	ring_wait(r, 1);
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
	size_t k = (size_t)(h - t), at = (size_t)(t % RING_CAP);
	size_t first = k < RING_CAP - at ? k : RING_CAP - at;
	if (!k || max < 1)
		return 0;
	iov[0] = (struct iovec){ r->buf + at, first };
	if (first == k || max < 2)
		return 1;
	iov[1] = (struct iovec){ r->buf, k - first };
	return 2;
}

/* As pp_consume: release the first n unread bytes. */
static ssize_t ring_consume(void *ctx, size_t n)
{
	struct ring *r = ctx;
	atomic_store(&r->tail, atomic_load_explicit(&r->tail, memory_order_relaxed) + n);
	ring_wake(r, 0);
	return (ssize_t)n;
}

/* ---- the channels ------------------------------------------------------- */

enum chan {
	CH_KERNEL,     /* pipe(2), the kernel's default 64 KiB */
	CH_PP,         /* pp_pipe(PP_SHARED), read with pp_read */
	CH_PP_PEEK,    /* the same, read in place: pp_peek, pp_consume */
	CH_PP_ZC,      /* the same, written in place too: pp_reserve, pp_commit */
	CH_KERNEL_1M,  /* pipe(2) grown to 1 MiB with F_SETPIPE_SZ */
	CH_VMSPLICE,   /* pipe(2), the writer vmsplice(2)s, the reader read(2)s */
	CH_SOCKET,     /* socketpair(AF_UNIX, SOCK_STREAM), used one way */
	CH_EVENTFD,    /* eventfd(2): ping-pong only, 8-byte messages */
	CH_RING_FUTEX, /* struct ring, sleeping on futexes */
	CH_RING_SPIN,  /* struct ring, spinning */
	CH_RING_PEEK,  /* the same, read in place: ring_peek, ring_consume */
	CH_ICEORYX,    /* iceoryx publisher -> subscriber, waiting in a wait set (iceoryx.h) */
	CH_ICEORYX_POLL, /* the same, the subscriber busy-polling */
	CH_PP_ZC_1M,   /* CH_PP_ZC grown to 1 MiB: iceoryx's queue's bytes in flight */
	CH_PP_ZC_1M_SLEEPER, /* that, the reader exec'd with PP_SPIN_NS=0: it never spins */
	CH_PP_ZC_1M_POLL, /* that, the reader non-blocking, sleeping in poll(2) on pp_fd */
	CH_PP_NOSPIN,  /* CH_PP in processes run with PP_SPIN_NS=0: ping-pong's sleeping case */
	CH_PP_POLL,    /* CH_PP, the readers sleeping in poll(2) on pp_fd */
};

static const char *const chan_name[] = {
	[CH_KERNEL] = "kernel pipe",
	[CH_PP] = "pagepipe (PP_SHARED)",
	[CH_PP_PEEK] = "pagepipe, pp_peek reader",
	[CH_PP_ZC] = "pagepipe, pp_reserve -> pp_peek",
	[CH_KERNEL_1M] = "kernel pipe, 1 MiB",
	[CH_VMSPLICE] = "kernel pipe, vmsplice -> read",
	[CH_SOCKET] = "socketpair",
	[CH_EVENTFD] = "eventfd",
	[CH_RING_FUTEX] = "ring in shm, futex",
	[CH_RING_SPIN] = "ring in shm, spin",
	[CH_RING_PEEK] = "ring in shm, spin, in-place reader",
	[CH_ICEORYX] = "iceoryx (wait set)",
	[CH_ICEORYX_POLL] = "iceoryx (busy-poll)",
	[CH_PP_ZC_1M] = "pagepipe 1 MiB, pp_reserve -> pp_peek",
	[CH_PP_ZC_1M_SLEEPER] = "pagepipe 1 MiB, the same, reader sleeps",
	[CH_PP_ZC_1M_POLL] = "pagepipe 1 MiB, the same, reader in poll",
	[CH_PP_NOSPIN] = "pagepipe, nobody spins",
	[CH_PP_POLL] = "pagepipe, readers in poll(pp_fd)",
};

/* A variant run in a copy of this program with PP_SPIN_NS=0 (the library
 * reads it when it is loaded), and the kind it runs there. */
#define NOSPIN_OF(kind) ((kind) == CH_PP_NOSPIN ? CH_PP : 0)

#define IS_IOX(kind) ((kind) == CH_ICEORYX || (kind) == CH_ICEORYX_POLL)

/* The kinds whose reader sleeps in poll(2) on pp_fd. */
#define IN_POLL(kind) ((kind) == CH_PP_ZC_1M_POLL || (kind) == CH_PP_POLL)

/* The kinds whose writer makes its blocks in reserved pages (zc_write). */
#define IN_RESERVED(kind)                                                                    \
	((kind) == CH_PP_ZC || (kind) == CH_PP_ZC_1M || (kind) == CH_PP_ZC_1M_POLL ||              \
	 (kind) == CH_PP_ZC_1M_SLEEPER)

/* The kinds whose stream reader takes the data in place. */
#define IN_PLACE(kind)                                                                 \
	((kind) == CH_PP_PEEK || IN_RESERVED(kind) || (kind) == CH_RING_PEEK || IS_IOX(kind))

/* The kinds that have an end of file (the others: message counts). */
#define HAS_EOF(kind) ((kind) != CH_EVENTFD && !IS_IOX(kind))

/* One way from a writer to a reader. */
struct chan_t {
	enum chan kind;
	struct tp p;         /* all but rings and iceoryx; an eventfd: fd[0], a dup in fd[1] */
	struct ring *ring;   /* the rings: shared memory, mapped before the fork */
	unsigned long id;    /* iceoryx: the channel's name ... */
	struct iox_end *iox; /* ... and, in a child, its end there */
	int pfd;             /* IN_POLL: pp_fd of the read end, in the reader */
};

static unsigned long chan_ids; /* channels opened so far */

static void chan_open(struct chan_t *c, enum chan kind)
{
	memset(c, 0, sizeof *c);
	c->kind = kind;
	c->id = ++chan_ids;
	c->p.fd[0] = c->p.fd[1] = c->pfd = -1;
	switch (kind) {
	case CH_ICEORYX:
	case CH_ICEORYX_POLL:
		break; /* made in the children: iox_attach */
	case CH_PP_NOSPIN:
		die("chan_open: a kind run by run_nospin");
	case CH_KERNEL:
	case CH_KERNEL_1M:
	case CH_VMSPLICE:
		bench_open(&c->p, KERNEL);
		if (kind == CH_KERNEL_1M && tp_setsize(&c->p, 1, MiB) != (long)MiB)
			die("F_SETPIPE_SZ 1 MiB");
		break;
	case CH_PP:
	case CH_PP_PEEK:
	case CH_PP_ZC:
	case CH_PP_ZC_1M:
	case CH_PP_ZC_1M_POLL:
	case CH_PP_ZC_1M_SLEEPER:
	case CH_PP_POLL:
		if (tp_open(&c->p, 0, PP_SHARED) != 0)
			die("pp_pipe(PP_SHARED)");
		if ((kind == CH_PP_ZC_1M || kind == CH_PP_ZC_1M_POLL || kind == CH_PP_ZC_1M_SLEEPER) &&
		    tp_setsize(&c->p, 1, MiB) != (long)MiB)
			die("pp_setsize 1 MiB");
		break;
	case CH_SOCKET:
		c->p.kernel = 1; /* fd[1] writes, fd[0] reads, as a pipe's */
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c->p.fd) != 0)
			die("socketpair");
		break;
	case CH_EVENTFD:
		c->p.kernel = 1;
		c->p.fd[0] = eventfd(0, EFD_CLOEXEC);
		c->p.fd[1] = c->p.fd[0] < 0 ? -1 : fcntl(c->p.fd[0], F_DUPFD_CLOEXEC, 0);
		if (c->p.fd[1] < 0)
			die("eventfd");
		break;
	case CH_RING_FUTEX:
	case CH_RING_SPIN:
	case CH_RING_PEEK:
		c->ring = mmap(NULL, sizeof *c->ring, PROT_READ | PROT_WRITE,
		               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (c->ring == MAP_FAILED)
			die("mmap");
		c->ring->spin = kind != CH_RING_FUTEX;
		break;
	}
}

/*
 * The zero-copy writer's write: reserve up to n bytes of the pipe, make the
 * block in the reserved pages (here by copying it from the stream pattern:
 * the producer's own work, which pp_write and write(2) do for it from the
 * caller's buffer), commit it.  So this variant copies exactly as much as
 * the pp_peek one; what it measures is the calls, and it is the producer
 * that makes its data in place (a frame, a record) that saves a copy.
 */
static ssize_t zc_write(void *ctx, const void *buf, size_t n)
{
	struct pp_end *w = ((struct tp *)ctx)->e[1];
	struct iovec iov[16];
	ssize_t k = pp_reserve(w, iov, 16, n);
	if (k <= 0)
		return k;
	size_t done = 0;
	for (ssize_t i = 0; i < k; i++) {
		memcpy(iov[i].iov_base, (const unsigned char *)buf + done, iov[i].iov_len);
		done += iov[i].iov_len;
	}
	return pp_commit(w, done);
}

/* The vmsplice writer's write: the block's pages go into the kernel pipe
 * by reference, without SPLICE_F_GIFT (the stream pattern never changes,
 * so the reader copies what was written); the one copy is the reader's. */
static ssize_t vmsplice_write(void *ctx, const void *buf, size_t n)
{
	struct iovec v = { (void *)buf, n };
	return vmsplice(((struct tp *)ctx)->fd[1], &v, 1, 0);
}

/*
 * The reader that sleeps when idle, as an event loop's does: its end is
 * non-blocking, and where a call would wait it sleeps in poll(2) on pp_fd
 * (no spinning; the writer then pays for keeping the descriptor's
 * readiness in step).  c->pfd is set up in the reader process (poll_setup).
 */
static void poll_setup(struct chan_t *c)
{
	if (pp_setfl(c->p.e[0], PP_NONBLOCK) != 0 || (c->pfd = pp_fd(c->p.e[0])) < 0)
		die("pp_setfl/pp_fd");
}

static int poll_wait(struct chan_t *c)
{
	struct pollfd p = { c->pfd, POLLIN, 0 };
	return poll(&p, 1, -1) < 0 && errno != EINTR ? -1 : 0;
}

static ssize_t poll_read(void *ctx, void *buf, size_t n)
{
	struct chan_t *c = ctx;
	ssize_t k;
	while ((k = pp_read(c->p.e[0], buf, n)) < 0 && errno == EAGAIN)
		if (poll_wait(c) != 0)
			return -1;
	return k;
}

static ssize_t poll_peek(void *ctx, struct iovec *iov, int max)
{
	struct chan_t *c = ctx;
	ssize_t k;
	while ((k = pp_peek(c->p.e[0], iov, max)) < 0 && errno == EAGAIN)
		if (poll_wait(c) != 0)
			return -1;
	return k;
}

static ssize_t poll_consume(void *ctx, size_t n)
{
	return pp_consume(((struct chan_t *)ctx)->p.e[0], n);
}

static ssize_t poll_write(void *ctx, const void *buf, size_t n)
{
	return pp_write(((struct chan_t *)ctx)->p.e[1], buf, n);
}

static ssize_t poll_zc_write(void *ctx, const void *buf, size_t n)
{
	return zc_write(&((struct chan_t *)ctx)->p, buf, n);
}

static struct bench_io chan_io(struct chan_t *c)
{
	if (c->kind == CH_PP_ZC_1M_POLL)
		return (struct bench_io){ poll_read, poll_zc_write, poll_peek, poll_consume, c };
	if (c->kind == CH_PP_POLL)
		return (struct bench_io){ poll_read, poll_write, poll_peek, poll_consume, c };
	if (c->kind == CH_VMSPLICE) {
		struct bench_io io = bench_tp_io(&c->p);
		io.write = vmsplice_write;
		return io;
	}
	if (IN_RESERVED(c->kind)) {
		struct bench_io io = bench_tp_io(&c->p);
		io.write = zc_write;
		return io;
	}
	if (c->ring)
		return (struct bench_io){ ring_read, ring_write, ring_peek, ring_consume, c->ring };
	if (IS_IOX(c->kind))
		return (struct bench_io){ iox_read, iox_write, iox_peek, iox_consume, c->iox };
	return bench_tp_io(&c->p);
}

/* This process lets go of end `which` (0 read, 1 write) without using it:
 * the other side sees nothing of a ring's ends. */
static void chan_drop(struct chan_t *c, int which)
{
	if (!c->ring)
		bench_close(&c->p, which);
}

/* This process is done with end `which`: closing a write end means end of
 * file for the reader. */
static void chan_done(struct chan_t *c, int which)
{
	if (!c->ring) {
		bench_close(&c->p, which);
	} else if (which == 1) {
		atomic_store(&c->ring->closed, 1);
		ring_wake(c->ring, 1);
	}
}

/* ---- two processes -------------------------------------------------------- */

/* What the children of a run report, in memory shared with the parent. */
struct report {
	double t0, t1;      /* the writer's (pinger's) start; the pinger's end */
	struct rx rx;       /* the stream reader's */
	int werr;           /* the stream writer's errno, or 0 */
	long done, bad;     /* ping-pong: round trips done, echoes that differed */
	int perr, eerr;     /* ping-pong: pinger's and echoer's errno, or 0 */
	ssize_t tail;       /* the echoer's read after the last round: 0 (EOF) */
	double cpu[2];      /* each child's CPU use while it ran: CPU seconds (all its
	                     * threads) over its own time */
};

static struct report *rep; /* mapped MAP_SHARED once, cleared per run */
static int rep_fd = -1;     /* its memfd, which an exec'd reader maps too */

/* Map the report in memory that survives an exec: a memfd. */
static void rep_map(void)
{
	if ((rep_fd = memfd_create("bench_procs-report", MFD_CLOEXEC)) < 0 ||
	    ftruncate(rep_fd, sizeof *rep) != 0)
		die("memfd_create");
	rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED, rep_fd, 0);
	if (rep == MAP_FAILED)
		die("mmap");
}

/* The CPU time of this process (all its threads), in seconds. */
static double cpu_now(void)
{
	struct timespec c;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
	return (double)c.tv_sec + (double)c.tv_nsec / 1e9;
}

/*
 * The reader that never spins: the stream reader's child execs this
 * program again as `bench_procs --sleeper END REPORT READY GO TOTAL` with
 * PP_SPIN_NS=0 in its environment (the library reads it when it is
 * loaded), so that only the reader's waits sleep at once; the writer is
 * the usual one.  END is the read end, exported (pp_export) before the
 * exec; REPORT the report's memfd; READY and GO the run's handshake,
 * which the exec'd reader makes itself, so the exec is not timed.
 */
static void exec_sleeper(struct chan_t *c, int ready, int go, unsigned long long total)
{
	char self[] = "/proc/self/exe", mode[] = "--sleeper", a[5][32];
	int end = pp_export(c->p.e[0]);
	int fds[4] = { end, rep_fd, ready, go };
	for (int i = 0; i < 4; i++) {
		if (fds[i] < 0 || fcntl(fds[i], F_SETFD, 0) != 0)
			_exit(5);
		snprintf(a[i], sizeof a[i], "%d", fds[i]);
	}
	snprintf(a[4], sizeof a[4], "%llu", total);
	char *argv[] = { self, mode, a[0], a[1], a[2], a[3], a[4], NULL };
	setenv("PP_SPIN_NS", "0", 1);
	execv(argv[0], argv);
	_exit(127);
}

static int sleeper_main(int argc, char **argv)
{
	if (argc != 7)
		return 2;
	int end = atoi(argv[2]), ready = atoi(argv[4]), go = atoi(argv[5]);
	rep_fd = atoi(argv[3]);
	rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED, rep_fd, 0);
	struct pp_end *in = pp_import(end);
	char b;
	if (rep == MAP_FAILED || !in)
		return 3;
	close(end);
	bench_pattern(PERIOD, CAT_BUF, 0);
	if (write(ready, &b, 1) != 1 || read(go, &b, 1) != 0)
		return 4;
	double t0 = t_now(), c0 = cpu_now();
	bench_peek_stream(in, 1, &rep->rx);
	rep->cpu[1] = (cpu_now() - c0) / (t_now() - t0);
	pp_close(in);
	return rep->rx.received == strtoull(argv[6], NULL, 10) ? 0 : 1;
}

/* The last run's CPU use: the sum of both children's CPU seconds over
 * their time (2.0: both busy all along, as spinning or polling readers
 * are; 1.0 for a ping-pong that never spins, one side working at a time). */
static double run_cpu;

struct run {
	struct chan_t ch[2]; /* a stream uses ch[0]; ping-pong ch[0] there, ch[1] back */
	int nch;
	size_t wsize;             /* stream: bytes per write */
	unsigned long long total; /* stream: bytes */
	long rounds;              /* ping-pong: round trips */
	size_t msg;               /* ping-pong: bytes per message */
	double scale;             /* for the children's watchdog */
};

/*
 * Fork the two children of a run: child 0 writes channel 0 and reads
 * channel 1, child 1 the other way round.  Each drops the ends it does not
 * use and says so; once both have, the parent (which has dropped every end)
 * closes the start pipe and both go, then it waits for them.  A child that
 * does not exit 0 (a crash, its watchdog) counts as a data error.
 */
static void run_children(struct run *r, void (*child)(struct run *, int who))
{
	int ready[2], go[2];
	pid_t pid[2];
	char b[2];

	memset(rep, 0, sizeof *rep);
	if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0)
		die("pipe2");
	fflush(NULL);
	for (int who = 0; who < 2; who++) {
		if ((pid[who] = fork()) < 0)
			die("fork");
		if (pid[who] == 0) {
			bench_arm(r->scale);
			close(ready[0]);
			close(go[1]);
			for (int i = 0; i < r->nch; i++)
				chan_drop(&r->ch[i], (who + i) % 2);
			if (IS_IOX(r->ch[0].kind)) {
				iox_join();
				for (int i = 0; i < r->nch; i++)
					r->ch[i].iox = iox_attach((int)getppid(), r->ch[i].id,
					                          (who + i + 1) % 2,
					                          r->ch[i].kind == CH_ICEORYX_POLL,
					                          r->wsize, r->total);
				if (iox_connected() != 0)
					_exit(4);
			}
			for (int i = 0; i < r->nch; i++)
				if (IN_POLL(r->ch[i].kind) && (who + i) % 2 == 1)
					poll_setup(&r->ch[i]);
			if (r->ch[0].kind == CH_PP_ZC_1M_SLEEPER && who == 1)
				exec_sleeper(&r->ch[0], ready[1], go[0], r->total);
			if (write(ready[1], b, 1) != 1 || read(go[0], b, 1) != 0)
				_exit(3);
			double t0 = t_now(), c0 = cpu_now();
			child(r, who);
			rep->cpu[who] = (cpu_now() - c0) / (t_now() - t0);
			if (IS_IOX(r->ch[0].kind)) {
				iox_leave();
				exit(0); /* iceoryx's exit handlers remove its sockets */
			}
			_exit(0);
		}
	}
	close(ready[1]);
	close(go[0]);
	for (int i = 0; i < r->nch; i++) {
		chan_drop(&r->ch[i], 0);
		chan_drop(&r->ch[i], 1);
		if (r->ch[i].ring)
			munmap(r->ch[i].ring, sizeof *r->ch[i].ring);
	}
	for (size_t got = 0; got < 2;) {
		ssize_t k = read(ready[0], b, 2 - got);
		if (k <= 0)
			break; /* a child died before it was ready: its status says */
		got += (size_t)k;
	}
	close(go[1]); /* the start */
	close(ready[0]);
	for (int who = 0; who < 2; who++) {
		int st;
		if (waitpid(pid[who], &st, 0) != pid[who])
			die("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "DATA ERROR: %s: child %d %s %d\n", chan_name[r->ch[0].kind],
			        who, WIFEXITED(st) ? "exited" : "killed by signal",
			        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			data_errors++;
		}
	}
}

/* Stream: child 0 writes, child 1 reads and checks. */
static void stream_child(struct run *r, int who)
{
	struct chan_t *c = &r->ch[0];
	struct bench_io io = chan_io(c);
	if (who == 0) {
		rep->t0 = t_now();
		rep->werr = bench_write_stream_io(&io, r->total, r->wsize);
		chan_done(c, 1);
	} else {
		bench_read_stream_io(&io, IN_PLACE(c->kind) ? 0 : READ_BUF, 1, &rep->rx);
		chan_done(c, 0);
	}
}

/* One message of n bytes each way: 0, or -1 with errno (EIO for a short
 * count or an unexpected end of file). */
static int xfer(const struct bench_io *io, void *buf, size_t n, int writing)
{
	ssize_t k;
	do
		k = writing ? io->write(io->ctx, buf, n) : io->read(io->ctx, buf, n);
	while (k < 0 && errno == EINTR);
	if (k == (ssize_t)n)
		return 0;
	if (k >= 0)
		errno = EIO;
	return -1;
}

/* Ping-pong: child 0 pings and times, child 1 echoes. */
static void pingpong_child(struct run *r, int who)
{
	struct bench_io there = chan_io(&r->ch[0]), back = chan_io(&r->ch[1]);
	uint64_t out, in = 0; /* an eventfd message is never 0 */

	if (who == 0) {
		rep->t0 = t_now();
		for (long i = 0; i < r->rounds; i++) {
			out = (uint64_t)i * 7 + 1;
			in = 0;
			if (xfer(&there, &out, r->msg, 1) != 0 || xfer(&back, &in, r->msg, 0) != 0) {
				rep->perr = errno;
				break;
			}
			rep->bad += memcmp(&in, &out, r->msg) != 0;
			rep->done++;
		}
		rep->t1 = t_now();
		chan_done(&r->ch[0], 1);
		chan_done(&r->ch[1], 0);
	} else {
		for (long i = 0; i < r->rounds; i++)
			if (xfer(&there, &in, r->msg, 0) != 0 || xfer(&back, &in, r->msg, 1) != 0) {
				rep->eerr = errno;
				break;
			}
		/* then end of file, once the pinger closed */
		rep->tail = HAS_EOF(r->ch[0].kind) ? there.read(there.ctx, &in, 1) : 0;
		chan_done(&r->ch[1], 1);
		chan_done(&r->ch[0], 0);
	}
}

/* One run of a stream over kind: bytes per second. */
static double run_stream(enum chan kind, size_t wsize, unsigned long long total, double scale)
{
	struct run r = { .nch = 1, .wsize = wsize, .total = total, .scale = scale };
	chan_open(&r.ch[0], kind);
	run_children(&r, stream_child);
	if (rep->werr || rep->rx.err || rep->rx.received != total || rep->rx.bad) {
		fprintf(stderr,
		        "DATA ERROR: %s, %zu-byte writes: wrote %llu, received %llu, %lu bad "
		        "reads of %lu, write errno %d, read errno %d\n",
		        chan_name[kind], wsize, total, rep->rx.received, rep->rx.bad, rep->rx.reads,
		        rep->werr, rep->rx.err);
		data_errors++;
	}
	if (getenv("PP_BENCH_READS"))
		fprintf(stderr, "  (%s: %lu reads, %.1f bytes per read)\n", chan_name[kind],
		        rep->rx.reads, (double)total / (double)(rep->rx.reads ? rep->rx.reads : 1));
	run_cpu = rep->cpu[0] + rep->cpu[1];
	return (double)total / (rep->rx.t1 - rep->t0);
}

/* One run of ping-pong over two channels of kind: round trips per second. */
static double run_pingpong(enum chan kind, long rounds, double scale)
{
	struct run r = { .nch = 2, .rounds = rounds, .scale = scale };
	r.msg = kind == CH_EVENTFD ? sizeof(uint64_t) : 1;
	chan_open(&r.ch[0], kind);
	chan_open(&r.ch[1], kind);
	run_children(&r, pingpong_child);
	if (rep->done != rounds || rep->bad || rep->perr || rep->eerr || rep->tail != 0) {
		fprintf(stderr,
		        "DATA ERROR: %s ping-pong: %ld of %ld round trips, %ld wrong echoes, "
		        "pinger errno %d, echoer errno %d, final read %zd\n",
		        chan_name[kind], rep->done, rounds, rep->bad, rep->perr, rep->eerr, rep->tail);
		data_errors++;
	}
	run_cpu = rep->cpu[0] + rep->cpu[1];
	return (double)rounds / (rep->t1 - rep->t0);
}

/* ---- memcpy: the copy bandwidth bound --------------------------------- */

/* One thread copies the stream 64 KiB at a time into one 64 KiB buffer
 * (cache-hot, as a ring's pages are): bytes per second. */
static double run_memcpy(int variant, const void *ctx)
{
	unsigned long long total = *(const unsigned long long *)ctx;
	unsigned char *dst = bench_buf(64 * KiB);
	(void)variant;
	if (!dst)
		die("malloc");
	memset(dst, 0, 64 * KiB);
	double t0 = t_now();
	for (unsigned long long pos = 0; pos < total; pos += 64 * KiB) {
		memcpy(dst, expected(pos), 64 * KiB);
		__asm__ __volatile__("" : : "r"(dst) : "memory");
	}
	double t1 = t_now();
	free(dst);
	return (double)total / (t1 - t0);
}

/* A target between two variants of a case: a's rate at least `target`
 * times b's (for ping-pong: b's round trip time over a's). */
struct versus {
	enum chan a, b;
	double target;
};

struct pcase {
	const char *name;
	size_t wsize;                /* stream: bytes per write; 0: ping-pong */
	unsigned long long amount;   /* bytes, or round trips, at scale 1 */
	int n;                       /* variants; the first is the kernel pipe */
	enum chan v[BENCH_MAX_VARIANTS];
	double target[BENCH_MAX_VARIANTS]; /* least ratio to the kernel pipe, or 0 */
	struct versus vs[6];         /* targets against other peers; ends at a == 0 */
};

struct case_run {
	const struct pcase *c;
	unsigned long long amount; /* scaled */
	double scale;
};

/* ---- the writer alone: the per-call bound ------------------------------ */

/*
 * One process writes the stream in writes of wsize into a pagepipe grown to
 * 1 MiB, no reader running: a half-full batch at a time, drained between
 * batches untimed (byte counts checked).  Bytes per second of the writes
 * alone: what the writer's calls cost without a peer, a bound on the two
 * process rate.  Variant 0 a PP_SHARED pipe, 1 a private one.
 */
static double run_alone(int variant, const void *ctx)
{
	const struct case_run *cr = ctx;
	size_t w = cr->c->wsize;
	unsigned char *buf = bench_buf(READ_BUF);
	double spent = 0;
	struct tp p;
	if (!buf)
		die("malloc");
	if (tp_open(&p, 0, variant ? 0 : PP_SHARED) != 0)
		die("pp_pipe");
	if (tp_setsize(&p, 1, MiB) != (long)MiB)
		die("pp_setsize");
	for (unsigned long long pos = 0; pos < cr->amount;) {
		unsigned long long end = pos + MiB / 2 < cr->amount ? pos + MiB / 2 : cr->amount;
		size_t batch = (size_t)(end - pos);
		double t0 = t_now();
		for (; pos < end; pos += w)
			if (tp_write(&p, expected(pos), w) != (ssize_t)w)
				die("pp_write");
		spent += t_now() - t0;
		for (ssize_t r; batch > 0; batch -= (size_t)r)
			if ((r = tp_read(&p, buf, READ_BUF)) <= 0 || (size_t)r > batch)
				die("pp_read of a batch");
	}
	tp_close(&p);
	free(buf);
	return (double)cr->amount / spent;
}

/* ---- fan-out to reader processes (issue 15) ----------------------------- */

/*
 * A distributor process writes the stream in 64 KiB writes into a source
 * PP_SHARED pipe (64 KiB) and, after each write, pp_fanout's the block to N
 * output pipes, each read by a reader process of its own: pp_peek, the
 * sampled check where the bytes lie (first and last byte of each page of
 * the stream, one page in 16 in full: bench.h's check), pp_consume, so
 * that a reader's own work on the bytes is as small as a checked reader's
 * can be and what the run times
 * is the distribution.  Every reader gets the whole stream, the same byte
 * count whatever N; the rate is one reader's bytes over the time from the
 * distributor's start to the last reader's end of file.  The outputs are
 * made by pp_pipe_in in the source's memory (the fan-out moves page
 * references: no byte copied), or, for comparison, by pp_pipe, each in a
 * memory of its own (the fan-out copies every block into each).  "no
 * fan-out" is the same distributor writing straight into the one reader's
 * pipe: what the hop through the source costs.  With 64 KiB outputs a
 * block fills an output, so the next fan-out waits until every reader has
 * taken all of it (the distributor runs in lockstep with the slowest
 * reader); with 1 MiB outputs the readers may lag 16 blocks behind.
 *
 * Pages in use: every 32nd block the distributor samples pp_shared_stats
 * (pages_in_ring + pages_held, summed over the memories where the outputs
 * have their own) after the write (the source full) and after the block's
 * fan-out (the source empty again: the pages are the outputs', not yet
 * read), and keeps the peaks.  Not every block: a pp_shared_stats takes the
 * memory's lock and walks its page table: about 2 us here, as much as a
 * block's write and fan-out together (sampled after every block, it cut
 * the "fan-out to 1" rate by about a third, in runs minutes apart).
 *
 * CPU: all the processes' CPU seconds over the run's time (at most the
 * CPU count), and per 64 KiB block the distributor's and one reader's CPU
 * microseconds; these include spinning, as a pagepipe's waits spin before
 * they sleep.  With N readers the run has N + 1 processes: on a 2-CPU
 * machine N = 2 and N = 4 oversubscribe the CPUs, and the report says so.
 *
 * The distributor alone (a cap): one process writes each block into the
 * source and fans it out to N pipes of 1 MiB, no reader running, the
 * outputs emptied untimed (pp_consume, byte counts checked) every 8
 * blocks: what the distribution costs the distributor per block, with no
 * other process in the way.
 */
#define FAN_MAX 4

static unsigned long long scaled(unsigned long long amount, double scale, size_t unit,
                                 unsigned long long least);

enum {
	FO_DIRECT, FO_REF1, FO_REF2, FO_REF4, FO_COPY4, FO_REF1_1M, FO_REF4_1M, FO_COPY4_1M,
	FO_COUNT
};

static const struct fan_variant {
	const char *name;
	int n;       /* readers */
	int copy;    /* outputs in memories of their own (pp_pipe): the fan-out copies */
	int direct;  /* no source, no fan-out: the distributor writes the one output */
	size_t size; /* the outputs' capacity, or 0 for the default (64 KiB) */
	int base;    /* the variant whose time it is compared with: fan-out to 1 */
} fan_var[FO_COUNT] = {
	[FO_DIRECT] = { "no fan-out: pp_write -> 1 reader", 1, 0, 1, 0, FO_REF1 },
	[FO_REF1] = { "fan-out to 1, by reference", 1, 0, 0, 0, FO_REF1 },
	[FO_REF2] = { "fan-out to 2, by reference", 2, 0, 0, 0, FO_REF1 },
	[FO_REF4] = { "fan-out to 4, by reference", 4, 0, 0, 0, FO_REF1 },
	[FO_COPY4] = { "fan-out to 4, copies (pp_pipe outputs)", 4, 1, 0, 0, FO_REF1 },
	[FO_REF1_1M] = { "fan-out to 1, by reference, 1 MiB", 1, 0, 0, MiB, FO_REF1_1M },
	[FO_REF4_1M] = { "fan-out to 4, by reference, 1 MiB", 4, 0, 0, MiB, FO_REF1_1M },
	[FO_COPY4_1M] = { "fan-out to 4, copies, 1 MiB", 4, 1, 0, MiB, FO_REF1_1M },
};

/* What the children of a fan-out run report, in memory shared with the
 * parent (mapped once, cleared per run). */
struct fan_report {
	double t0;               /* the distributor's start */
	int derr;                /* the distributor's errno, or 0 */
	long peak_out, peak_all; /* peak pages in use: after a fan-out, after a write */
	double cpu[FAN_MAX + 1]; /* CPU seconds: [0] the distributor, [1 + i] reader i */
	struct rx rx[FAN_MAX];
};

static struct fan_report *frep;

/* The figures of a fan-out variant's runs, beside its rate. */
struct fan_figs {
	double busy[MAX_REPS];   /* CPUs kept busy: all CPU seconds over the run's time */
	double dist[MAX_REPS];   /* the distributor's CPU microseconds per 64 KiB block */
	double reader[MAX_REPS]; /* one reader's (their mean) CPU microseconds per block */
	double others[MAX_REPS]; /* CPUs kept busy by other processes meanwhile */
	int runs;
	long peak_out, peak_all; /* the highest over the runs */
};

struct fan_case {
	unsigned long long total; /* bytes each reader gets */
	double scale;
	struct fan_figs figs[FO_COUNT];
};

/* The machine's busy and total CPU time so far, in clock ticks (the first
 * line of /proc/stat; time stolen by the hypervisor counts as busy): what
 * other processes took of the CPUs during a run.  0 if unreadable. */
static int machine_ticks(unsigned long long *busy, unsigned long long *all)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
	                   &v[3], &v[4], &v[5], &v[6], &v[7])
	          : 0;
	if (f)
		fclose(f);
	if (n < 8)
		return 0;
	*busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* user nice system irq softirq steal */
	*all = *busy + v[3] + v[4];                      /* + idle iowait */
	return 1;
}

/* Pages in use (in rings or held by calls) in the memories of ends[0..n). */
static long fan_pages(struct pp_end *const *ends, int n)
{
	long pages = 0;
	for (int i = 0; i < n; i++) {
		struct pp_shared_stats st;
		if (pp_shared_stats(ends[i], &st) != 0)
			return -1;
		pages += st.pages_in_ring + st.pages_held;
	}
	return pages;
}

/* Write n stream bytes at pos, whole, into w; 0, or an errno. */
static int fan_write(struct pp_end *w, unsigned long long pos, size_t n)
{
	const unsigned char *p = expected(pos);
	for (size_t done = 0; done < n;) {
		ssize_t k = pp_write(w, p + done, n - done);
		if (k < 0 && errno != EINTR)
			return errno;
		if (k > 0)
			done += (size_t)k;
	}
	return 0;
}

/* Fan n bytes out of src to outs[0..nout), all of them; 0, or an errno. */
static int fan_all(struct pp_end *src, struct pp_end *const *outs, int nout, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t k = pp_fanout(src, outs, nout, n - done, 0);
		if (k < 0 && errno != EINTR)
			return errno;
		if (k == 0)
			return EIO; /* the source's end of file: not while we hold its writer */
		if (k > 0)
			done += (size_t)k;
	}
	return 0;
}

/* The distributor: write the stream into the source (src[1]; or, direct,
 * into outs[0]) and fan each block out of src[0]; 0, or an errno. */
static int fan_distribute(const struct fan_variant *fv, struct pp_end *const src[2],
                          struct pp_end *const *outs, unsigned long long total)
{
	/* The memories to sample: the source's (which holds the outputs too
	 * when they are by reference), and each output's own. */
	struct pp_end *mem[FAN_MAX + 1];
	int nmem = 0, err;
	long pages;
	if (!fv->direct)
		mem[nmem++] = src[0];
	if (fv->direct || fv->copy)
		for (int i = 0; i < fv->n; i++)
			mem[nmem++] = outs[i];
	for (unsigned long long pos = 0, block = 0; pos < total; block++) {
		size_t n = total - pos < 64 * KiB ? (size_t)(total - pos) : 64 * KiB;
		int sample = block % 32 == 0;
		if ((err = fan_write(fv->direct ? outs[0] : src[1], pos, n)) != 0)
			return err;
		pos += n;
		if (sample) {
			if ((pages = fan_pages(mem, nmem)) < 0)
				return errno;
			if (pages > frep->peak_all)
				frep->peak_all = pages;
		}
		if (fv->direct)
			continue;
		if ((err = fan_all(src[0], outs, fv->n, n)) != 0)
			return err;
		if (sample) {
			if ((pages = fan_pages(mem, nmem)) < 0)
				return errno;
			if (pages > frep->peak_out)
				frep->peak_out = pages;
		}
	}
	return 0;
}

/*
 * One run of a fan-out variant: the bytes per second of each reader's
 * stream.  The pipes are made before the forks; each child closes the ends
 * it does not use and says so, and all go at once, as run_children's do.
 * A child that does not exit 0, a reader short of a byte or with a wrong
 * one, or a distributor's error is a data error.
 */
static double run_fanout(int variant, const void *ctx)
{
	struct fan_case *fc = (struct fan_case *)ctx;
	const struct fan_variant *fv = &fan_var[variant];
	struct fan_figs *fg = &fc->figs[variant];
	struct pp_end *src[2] = { NULL, NULL }, *out[FAN_MAX][2], *outs[FAN_MAX];
	int ready[2], go[2], nproc = fv->n + 1, bad = 0;
	pid_t pid[FAN_MAX + 1];
	char b[FAN_MAX + 1];

	memset(frep, 0, sizeof *frep);
	if (!fv->direct && pp_pipe(src, PP_SHARED) != 0)
		die("pp_pipe(PP_SHARED)");
	for (int i = 0; i < fv->n; i++) {
		int own = fv->direct || fv->copy;
		if ((own ? pp_pipe(out[i], PP_SHARED) : pp_pipe_in(out[i], 0, src[1])) != 0)
			die(own ? "pp_pipe(PP_SHARED)" : "pp_pipe_in");
		if (fv->size && pp_setsize(out[i][1], fv->size) != (long)fv->size)
			die("pp_setsize");
		outs[i] = out[i][1];
	}
	if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0)
		die("pipe2");
	fflush(NULL);
	for (int who = 0; who < nproc; who++) { /* 0 the distributor, 1 + i reader i */
		if ((pid[who] = fork()) < 0)
			die("fork");
		if (pid[who] > 0)
			continue;
		bench_arm(fc->scale);
		close(ready[0]);
		close(go[1]);
		for (int i = 0; i < fv->n; i++)
			if ((who != 1 + i && pp_close(out[i][0]) != 0) ||
			    (who != 0 && pp_close(out[i][1]) != 0))
				_exit(5);
		if (src[0] && who != 0 && (pp_close(src[0]) != 0 || pp_close(src[1]) != 0))
			_exit(5);
		if (write(ready[1], b, 1) != 1 || read(go[0], b, 1) != 0)
			_exit(3);
		double c0 = cpu_now();
		if (who == 0) {
			frep->t0 = t_now();
			frep->derr = fan_distribute(fv, src, outs, fc->total);
			for (int i = 0; i < fv->n; i++)
				pp_close(out[i][1]); /* the readers' end of file */
			if (src[0]) {
				pp_close(src[1]);
				pp_close(src[0]);
			}
		} else {
			bench_peek_stream(out[who - 1][0], 1, &frep->rx[who - 1]);
			pp_close(out[who - 1][0]);
		}
		frep->cpu[who] = cpu_now() - c0;
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	for (int i = 0; i < fv->n; i++)
		if (pp_close(out[i][0]) != 0 || pp_close(out[i][1]) != 0)
			die("pp_close");
	if (src[0] && (pp_close(src[0]) != 0 || pp_close(src[1]) != 0))
		die("pp_close");
	for (int got = 0; got < nproc;) {
		ssize_t k = read(ready[0], b, (size_t)(nproc - got));
		if (k <= 0)
			break; /* a child died before it was ready: its status says */
		got += (int)k;
	}
	unsigned long long busy0 = 0, all0 = 0, busy1 = 0, all1 = 0;
	int ticks = machine_ticks(&busy0, &all0);
	close(go[1]); /* the start */
	close(ready[0]);
	for (int who = 0; who < nproc; who++) {
		int st;
		if (waitpid(pid[who], &st, 0) != pid[who])
			die("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "DATA ERROR: %s: %s %d %s %d\n", fv->name,
			        who ? "reader" : "distributor", who ? who - 1 : 0,
			        WIFEXITED(st) ? "exited" : "killed by signal",
			        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			bad = 1;
		}
	}
	ticks = ticks && machine_ticks(&busy1, &all1) && all1 > all0;
	double t1 = frep->t0, rcpu = 0;
	for (int i = 0; i < fv->n; i++) {
		const struct rx *rx = &frep->rx[i];
		if (rx->err || rx->received != fc->total || rx->bad) {
			fprintf(stderr,
			        "DATA ERROR: %s: reader %d received %llu of %llu bytes, %lu bad reads "
			        "of %lu, errno %d\n",
			        fv->name, i, rx->received, fc->total, rx->bad, rx->reads, rx->err);
			bad = 1;
		}
		if (rx->t1 > t1)
			t1 = rx->t1;
		rcpu += frep->cpu[1 + i];
	}
	if (frep->derr) {
		fprintf(stderr, "DATA ERROR: %s: the distributor failed, errno %d\n", fv->name,
		        frep->derr);
		bad = 1;
	}
	data_errors += bad;
	if (bad || !(t1 > frep->t0))
		return 1; /* 1 byte/s: a wrong run shows, and the report says why */
	double blocks = (double)fc->total / (64 * KiB);
	if (fg->runs < MAX_REPS) {
		fg->busy[fg->runs] = (frep->cpu[0] + rcpu) / (t1 - frep->t0);
		fg->dist[fg->runs] = frep->cpu[0] / blocks * 1e6;
		fg->reader[fg->runs] = rcpu / fv->n / blocks * 1e6;
		/* the machine's busy CPUs, less ours (-1: unknown) */
		fg->others[fg->runs] = !ticks ? -1
		                       : (double)(busy1 - busy0) / (double)(all1 - all0) *
		                                 (double)sysconf(_SC_NPROCESSORS_ONLN) -
		                         fg->busy[fg->runs];
		if (ticks && fg->others[fg->runs] < 0)
			fg->others[fg->runs] = 0;
		fg->runs++;
	}
	if (frep->peak_out > fg->peak_out)
		fg->peak_out = frep->peak_out;
	if (frep->peak_all > fg->peak_all)
		fg->peak_all = frep->peak_all;
	return (double)fc->total / (t1 - frep->t0);
}

/* A reader alone (a cap): one process fills a 1 MiB pipe (16 blocks,
 * untimed), then takes them as the fan-out's readers do (pp_peek, the
 * sampled check, pp_consume), timed; bytes per second of the timed part. */
static double fan_reader_alone(const struct fan_case *fc)
{
	struct pp_end *p[2];
	struct iovec iov[64];
	unsigned long long pos = 0;
	unsigned long bad = 0;
	double spent = 0;
	if (pp_pipe(p, PP_SHARED) != 0 || pp_setsize(p[1], MiB) != (long)MiB)
		die("pp_pipe / pp_setsize");
	while (pos < fc->total) {
		unsigned long long end = pos;
		for (int b = 0; b < 16 && end < fc->total; b++) {
			size_t k = fc->total - end < 64 * KiB ? (size_t)(fc->total - end) : 64 * KiB;
			if (fan_write(p[1], end, k) != 0)
				die("pp_write");
			end += k;
		}
		double t0 = t_now();
		while (pos < end) {
			ssize_t k = pp_peek(p[0], iov, 64);
			if (k <= 0)
				break;
			size_t got = 0;
			for (ssize_t i = 0; i < k; i++) {
				bad += (unsigned long)check(iov[i].iov_base, iov[i].iov_len, pos + got, 1);
				got += iov[i].iov_len;
			}
			if (pp_consume(p[0], got) != (ssize_t)got)
				break;
			pos += got;
		}
		spent += t_now() - t0;
		if (pos != end || bad) {
			fprintf(stderr, "DATA ERROR: a reader alone: at %llu of %llu, %lu bad reads\n",
			        pos, end, bad);
			data_errors++;
			break;
		}
	}
	if (pp_close(p[0]) != 0 || pp_close(p[1]) != 0)
		die("pp_close");
	return (double)fc->total / spent;
}

/* The distributor alone (a cap): variant 0 fans out to 1 pipe by
 * reference, 1 to 4 by reference, 2 to 4 that copy (3 is a reader alone:
 * fan_reader_alone); bytes of the stream per second of the timed write
 * and fan-out calls. */
static double run_fan_alone(int variant, const void *ctx)
{
	const struct fan_case *fc = ctx;
	int n = variant ? FAN_MAX : 1, copy = variant == 2;
	struct pp_end *src[2], *out[FAN_MAX][2], *outs[FAN_MAX];
	unsigned long long pos = 0;
	double spent = 0;
	if (variant == 3)
		return fan_reader_alone(fc);
	if (pp_pipe(src, PP_SHARED) != 0)
		die("pp_pipe(PP_SHARED)");
	for (int i = 0; i < n; i++) {
		if ((copy ? pp_pipe(out[i], PP_SHARED) : pp_pipe_in(out[i], 0, src[1])) != 0 ||
		    pp_setsize(out[i][1], MiB) != (long)MiB)
			die("pp_pipe / pp_pipe_in / pp_setsize");
		outs[i] = out[i][1];
	}
	while (pos < fc->total) {
		size_t batch = 0;
		double t0 = t_now();
		for (int b = 0; b < 8 && pos < fc->total; b++) {
			size_t k = fc->total - pos < 64 * KiB ? (size_t)(fc->total - pos) : 64 * KiB;
			if (fan_write(src[1], pos, k) != 0 || fan_all(src[0], outs, n, k) != 0)
				die("pp_write / pp_fanout");
			pos += k;
			batch += k;
		}
		spent += t_now() - t0;
		for (int i = 0; i < n; i++)
			if (pp_nread(out[i][0]) != (long)batch ||
			    pp_consume(out[i][0], batch) != (ssize_t)batch) {
				fprintf(stderr, "DATA ERROR: the distributor alone: an output holds %ld "
				        "bytes, not %zu\n", (long)pp_nread(out[i][0]), batch);
				data_errors++;
				die("the distributor alone");
			}
	}
	for (int i = 0; i < n; i++)
		if (pp_close(out[i][0]) != 0 || pp_close(out[i][1]) != 0)
			die("pp_close");
	if (pp_close(src[0]) != 0 || pp_close(src[1]) != 0)
		die("pp_close");
	return (double)fc->total / spent;
}

/* The case: every variant, alternated, a row each; the targets; the cap. */
static void fanout_case(const struct bench_opts *o)
{
	static struct fan_case fc;
	double med[FO_COUNT], alone[4];
	char amt[48];

	memset(&fc, 0, sizeof fc);
	fc.total = scaled(1024 * MiB, o->scale, 64 * KiB, 64 * KiB);
	fc.scale = o->scale;
	frep = mmap(NULL, sizeof *frep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (frep == MAP_FAILED)
		die("mmap");
	fmt_amount(amt, sizeof amt, fc.total);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	printf("\nfan-out to 4 reader processes (issue 15), %s to each reader per run:\n"
	       "a distributor process pp_writes the stream (64 KiB writes) into a 64 KiB\n"
	       "PP_SHARED pipe and pp_fanout's each block to N pipes (64 KiB unless named\n"
	       "1 MiB), one per reader process, which pp_peeks, checks (sampled) in place\n"
	       "and pp_consumes; per reader stream, the time over fan-out to 1's\n",
	       amt);
	printf("CPUs busy: ours, the run's processes' CPU seconds (spinning included) over its\n"
	       "time; others, the rest of the machine meanwhile (/proc/stat, steal included)\n");
	if (ncpu < 3)
		printf("NOTE: %ld CPUs for N + 1 processes: N = 2 and N = 4 oversubscribe them\n", ncpu);
	else if (ncpu < FAN_MAX + 1)
		printf("NOTE: %ld CPUs for N + 1 processes: N = 4 oversubscribes them\n", ncpu);
	printf("  %-38s %15s %8s %15s %15s %15s\n", "", "each reader", "time", "CPUs busy",
	       "CPU us / block", "peak pages");
	printf("  %-38s %15s %8s %7s %7s %7s %7s %7s %7s\n", "", "", "vs N=1", "ours", "others",
	       "distr", "reader", "fanned", "+source");
	fflush(stdout);
	bench_medians(FO_COUNT, o->reps, o->scale, run_fanout, &fc, med);
	for (int v = 0; v < FO_COUNT; v++) {
		struct fan_figs *fg = &fc.figs[v];
		char fanned[16] = "-";
		if (!fan_var[v].direct)
			snprintf(fanned, sizeof fanned, "%ld", fg->peak_out);
		printf("  %-38s %10.1f MB/s %7.2fx %7.2f %7.2f %7.1f %7.1f %7s %7ld\n", fan_var[v].name,
		       med[v] / 1e6, med[fan_var[v].base] / med[v], median(fg->busy, fg->runs),
		       median(fg->others, fg->runs), median(fg->dist, fg->runs),
		       median(fg->reader, fg->runs), fanned, fg->peak_all);
	}
	for (int k = 0; k < 2; k++) {
		int v = k ? FO_REF4_1M : FO_REF4;
		double t = med[fan_var[v].base] / med[v];
		printf("  fan-out to 4 vs to 1, by reference, %s pipes: time %.2fx  <=1.5x %s\n",
		       fan_var[v].size ? "1 MiB" : "64 KiB", t, bench_result(t <= 1.5));
	}
	printf("  fan-out to 2 vs to 1, by reference (3 processes): time %.2fx\n",
	       med[FO_REF1] / med[FO_REF2]);
	printf("  fan-out to 4, copies vs by reference: time %.2fx (64 KiB pipes), %.2fx (1 MiB)\n",
	       med[FO_REF4] / med[FO_COPY4], med[FO_REF4_1M] / med[FO_COPY4_1M]);
	for (int k = 0; k < 2; k++) {
		int v = k ? FO_REF4_1M : FO_REF4;
		long one = (long)((fan_var[v].size ? fan_var[v].size : 64 * KiB) / PP_PAGE_SIZE);
		long peak = fc.figs[v].peak_out;
		printf("  pages in use, fan-out to 4 by reference, %s pipes: %ld fanned (one copy %ld, "
		       "4 copies %ld)  <=%ld %s\n",
		       fan_var[v].size ? "1 MiB" : "64 KiB", peak, one, 4 * one, one,
		       bench_result(peak > 0 && peak <= one));
	}
	fflush(stdout);
	munmap(frep, sizeof *frep);
	bench_medians(4, o->reps, o->scale, run_fan_alone, &fc, alone);
	double d1 = 64 * KiB * 1e6 / alone[0], d4 = 64 * KiB * 1e6 / alone[1];
	double c4 = 64 * KiB * 1e6 / alone[2], r = 64 * KiB * 1e6 / alone[3];
	printf("  alone (caps), us per block: the distributor fanning out to 1 %.1f, to 4 %.1f "
	       "(%.2fx),\n    to 4 copying %.1f (%.2fx); a reader (pp_peek, check, pp_consume) "
	       "%.1f\n",
	       d1, d4, d4 / d1, c4, c4 / d1, r);
	/* The least time per block with every process's work as alone and no
	 * waiting: fan-out to 1's two processes each on a CPU; fan-out to 4's
	 * five sharing the CPUs there are. */
	double cpus = ncpu < FAN_MAX + 1 ? (double)ncpu : FAN_MAX + 1;
	double t1 = ncpu >= 2 ? (d1 > r ? d1 : r) : d1 + r;
	double t4 = (d4 + FAN_MAX * r) / cpus;
	if (t4 < d4)
		t4 = d4;
	printf("  so with %ld CPUs, fan-out to 4 by reference takes at least %.2fx fan-out to 1's "
	       "time\n    (its 5 processes' work as alone, %.1f us per block, over %g CPUs; "
	       "fan-out to 1: %.1f)\n",
	       ncpu, t4 / t1, d4 + FAN_MAX * r, cpus, t1);
	fflush(stdout);
}

/* ---- file | cat: real programs ------------------------------------------ */

/*
 * The hidden mode `bench_procs --cat SRC DST [BYTES]`: copy SRC to DST in
 * reads of 128 KiB, each written whole, as coreutils cat does.  SRC and DST
 * are a path, "-" (standard input / output), or "pp:FD", a pagepipe end
 * exported to descriptor FD.  With BYTES, check the data against the
 * stream pattern (sampled) and its count: exit 1 if wrong.
 */
static struct tp cat_end(const char *name, int writing)
{
	struct tp t;
	memset(&t, 0, sizeof t);
	t.fd[0] = t.fd[1] = -1;
	if (strncmp(name, "pp:", 3) == 0) {
		int fd = atoi(name + 3);
		if (!(t.e[writing] = pp_import(fd)))
			die("pp_import");
		close(fd);
	} else {
		t.kernel = 1;
		if (strcmp(name, "-") == 0)
			t.fd[writing] = writing;
		else if ((t.fd[writing] = open(name, writing ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY,
		                               0600)) < 0)
			die(name);
	}
	return t;
}

static int cat_main(int argc, char **argv)
{
	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: %s --cat SRC DST [BYTES]\n", argv[0]);
		return 2;
	}
	struct tp in = cat_end(argv[2], 0), out = cat_end(argv[3], 1);
	int checking = argc == 5;
	unsigned char *buf = bench_buf(CAT_BUF);
	unsigned long long pos = 0;
	unsigned long bad = 0;
	int err = 0;
	if (!buf)
		die("malloc");
	bench_pattern(PERIOD, CAT_BUF, 0);
	for (;;) {
		ssize_t r = tp_read(&in, buf, CAT_BUF);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = errno;
			break;
		}
		if (checking)
			bad += (unsigned long)check(buf, (size_t)r, pos, 1);
		pos += (unsigned long long)r;
		if ((err = tp_write_all(&out, buf, (size_t)r)) != 0)
			break;
	}
	if (tp_close_end(&out, 1) != 0 && !err)
		err = errno;
	tp_close_end(&in, 0);
	free(buf);
	free(pattern);
	if (err || (checking && (bad || pos != strtoull(argv[4], NULL, 10)))) {
		fprintf(stderr, "bench_procs --cat %s: %llu bytes, %lu bad reads, errno %d\n",
		        argv[2], pos, bad, err);
		return 1;
	}
	return 0;
}

enum { F_CAT, F_OWN_KERNEL, F_PAGEPIPE, F_COUNT };

static const char *const file_name[] = {
	[F_CAT] = "cat | cat (coreutils), kernel pipe",
	[F_OWN_KERNEL] = "bench_procs --cat x2, kernel pipe",
	[F_PAGEPIPE] = "bench_procs --cat x2, pagepipe",
};

struct file_case {
	char path[64];            /* the file, as /proc/PID/fd/N (it is unlinked) */
	const char *cat;          /* coreutils cat, found before the clock runs */
	unsigned long long size;
	int devnull;
};

/* fork and exec argv with standard input in (if >= 0), standard output out,
 * and descriptor keep (if >= 0) left open across the exec. */
static pid_t spawn(char *const argv[], int in, int out, int keep)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		if ((in >= 0 && dup2(in, 0) < 0) || dup2(out, 1) < 0 ||
		    (keep >= 0 && fcntl(keep, F_SETFD, 0) != 0))
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* One run of the file case's variant: bytes per second, from the first
 * fork to the last exit. */
static double run_file(int variant, const void *ctx)
{
	const struct file_case *fc = ctx;
	char self[] = "/proc/self/exe", mode[] = "--cat", dash[] = "-", cat[32];
	char path[64], from[32], into[32], bytes[32];
	struct pp_end *e[2] = { NULL, NULL };
	int fd[2];

	snprintf(path, sizeof path, "%s", fc->path);
	snprintf(cat, sizeof cat, "%s", fc->cat);
	snprintf(bytes, sizeof bytes, "%llu", fc->size);
	if (variant == F_PAGEPIPE) {
		if (pp_pipe(e, PP_SHARED) != 0)
			die("pp_pipe(PP_SHARED)");
		if ((fd[0] = pp_export(e[0])) < 0 || (fd[1] = pp_export(e[1])) < 0)
			die("pp_export");
	} else if (pipe2(fd, O_CLOEXEC) != 0) {
		die("pipe2");
	}
	snprintf(from, sizeof from, "pp:%d", fd[0]);
	snprintf(into, sizeof into, "pp:%d", fd[1]);
	char *writer[][5] = {
		[F_CAT] = { cat, path, NULL },
		[F_OWN_KERNEL] = { self, mode, path, dash, NULL },
		[F_PAGEPIPE] = { self, mode, path, into, NULL },
	};
	char *reader[][6] = {
		[F_CAT] = { cat, NULL },
		[F_OWN_KERNEL] = { self, mode, dash, dash, bytes, NULL },
		[F_PAGEPIPE] = { self, mode, from, dash, bytes, NULL },
	};
	int pp = variant == F_PAGEPIPE;

	fflush(NULL);
	double t0 = t_now();
	pid_t pid[2] = {
		spawn(writer[variant], -1, pp ? 1 : fd[1], pp ? fd[1] : -1),
		spawn(reader[variant], pp ? -1 : fd[0], fc->devnull, pp ? fd[0] : -1),
	};
	close(fd[0]);
	close(fd[1]);
	if (pp && (pp_close(e[0]) != 0 || pp_close(e[1]) != 0))
		die("pp_close");
	for (int i = 0; i < 2; i++) {
		int st;
		if (waitpid(pid[i], &st, 0) != pid[i])
			die("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "DATA ERROR: file case, %s: %s %s %d\n", file_name[variant],
			        i ? "reader" : "writer", WIFEXITED(st) ? "exited" : "killed by signal",
			        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			data_errors++;
		}
	}
	return (double)fc->size / (t_now() - t0);
}

/* The stream, size bytes of it, in an unlinked file on tmpfs; its name
 * for other processes is /proc/PID/fd/N. */
static int make_file(struct file_case *fc, unsigned long long size)
{
	const char *dirs[] = { "/dev/shm", getenv("TMPDIR"), "/tmp" };
	int fd = -1;
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && fd < 0; i++) {
		char tmpl[256];
		if (!dirs[i] || !*dirs[i])
			continue;
		snprintf(tmpl, sizeof tmpl, "%s/bench_procs.XXXXXX", dirs[i]);
		if ((fd = mkostemp(tmpl, O_CLOEXEC)) >= 0)
			unlink(tmpl);
	}
	if (fd < 0)
		die("mkstemp");
	struct tp f = { 1, { -1, fd }, { NULL, NULL }, 0 };
	if (bench_write_stream(&f, size, CAT_BUF) != 0)
		die("writing the file");
	fc->size = size;
	snprintf(fc->path, sizeof fc->path, "/proc/%d/fd/%d", (int)getpid(), fd);
	if ((fc->devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
		die("/dev/null");
	fc->cat = access("/usr/bin/cat", X_OK) == 0 ? "/usr/bin/cat"
	          : access("/bin/cat", X_OK) == 0   ? "/bin/cat"
	                                            : "cat";
	return fd;
}

/* ---- driver ----------------------------------------------------------- */

/*
 * A variant whose processes never spin: `bench_procs --one KIND WSIZE
 * AMOUNT SCALE` run with PP_SPIN_NS=0 in its environment makes the run
 * (stream or ping-pong) as this program does and prints its rate and CPU
 * use; it checks the data the same way and exits 1 on an error.
 */
static double run_nospin(enum chan kind, size_t wsize, unsigned long long amount, double scale)
{
	char k[16], w[32], a[32], sc[32], out[128];
	char self[] = "/proc/self/exe", mode[] = "--one";
	char *argv[] = { self, mode, k, w, a, sc, NULL };
	int p[2];
	snprintf(k, sizeof k, "%d", (int)kind);
	snprintf(w, sizeof w, "%zu", wsize);
	snprintf(a, sizeof a, "%llu", amount);
	snprintf(sc, sizeof sc, "%g", scale);
	if (pipe2(p, O_CLOEXEC) != 0)
		die("pipe2");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		setenv("PP_SPIN_NS", "0", 1);
		if (dup2(p[1], 1) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	ssize_t n = read(p[0], out, sizeof out - 1);
	close(p[0]);
	out[n > 0 ? n : 0] = 0;
	int st;
	double rate = 0, cpu = 0;
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || sscanf(out, "%lg %lg", &rate, &cpu) != 2) {
		fprintf(stderr, "DATA ERROR: %s: its run exited %d\n", chan_name[kind],
		        WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		data_errors++;
		rate = 1;
	}
	run_cpu = cpu;
	return rate;
}

static int one_main(int argc, char **argv)
{
	if (argc != 6)
		return 2;
	enum chan kind = (enum chan)atoi(argv[2]);
	size_t wsize = strtoul(argv[3], NULL, 10);
	unsigned long long amount = strtoull(argv[4], NULL, 10);
	double scale = atof(argv[5]);
	rep_map();
	bench_pattern(PERIOD, CAT_BUF, 0);
	double rate = wsize ? run_stream(kind, wsize, amount, scale)
	                    : run_pingpong(kind, (long)amount, scale);
	printf("%.17g %.17g\n", rate, run_cpu);
	return data_errors ? 1 : 0;
}

/* Each variant's CPU use in the runs of the case being measured. */
static double case_cpu[BENCH_MAX_VARIANTS][MAX_REPS];
static int case_cpu_n[BENCH_MAX_VARIANTS];

static double run_case(int variant, const void *ctx)
{
	const struct case_run *cr = ctx;
	enum chan kind = cr->c->v[variant];
	double rate = NOSPIN_OF(kind) ? run_nospin(NOSPIN_OF(kind), cr->c->wsize, cr->amount,
	                                           cr->scale)
	              : cr->c->wsize ? run_stream(kind, cr->c->wsize, cr->amount, cr->scale)
	                           : run_pingpong(kind, (long)cr->amount, cr->scale);
	if (case_cpu_n[variant] < MAX_REPS)
		case_cpu[variant][case_cpu_n[variant]++] = run_cpu;
	return rate;
}

/* One line: a variant's figure, its ratio to the first, the CPUs its two
 * processes kept busy (cpu < 0: not measured), target, result. */
static void row(const char *name, double v, double base, double cpu, int ping, double target)
{
	char fig[32], cp[16] = "", tg[32] = "";
	const char *res = "";
	double ratio = v / base; /* rates: for ping-pong, kernel time / this time */
	if (ping)
		snprintf(fig, sizeof fig, "%8.2f us/rt", 1e6 / v);
	else
		snprintf(fig, sizeof fig, "%9.1f MB/s", v / 1e6);
	if (target > 0) {
		if (ping)
			snprintf(tg, sizeof tg, "<=1/%g time", target);
		else
			snprintf(tg, sizeof tg, ">=%gx", target);
		res = bench_result(ratio >= target);
	}
	if (cpu >= 0)
		snprintf(cp, sizeof cp, "%4.2f cpu", cpu);
	printf("  %-36s %15s %8.2fx %9s  %-12s %s\n", name, fig, ratio, cp, tg, res);
	fflush(stdout);
}

/* A versus line, where both of its variants ran (iceoryx may not have). */
static void versus(const struct pcase *c, const double *med, const struct versus *vs)
{
	int a = -1, b = -1;
	for (int v = 0; v < c->n; v++) {
		if (c->v[v] == vs->a)
			a = v;
		if (c->v[v] == vs->b)
			b = v;
	}
	if (a < 0 || b < 0)
		return;
	double ratio = med[a] / med[b];
	char tg[16] = "";
	if (vs->target > 0)
		snprintf(tg, sizeof tg, ">=%gx", vs->target);
	printf("  %s vs %s: %.2fx  %s %s\n", chan_name[vs->a], chan_name[vs->b], ratio, tg,
	       vs->target > 0 ? bench_result(ratio >= vs->target) : "");
	fflush(stdout);
}

static unsigned long long scaled(unsigned long long amount, double scale, size_t unit,
                                 unsigned long long least)
{
	unsigned long long a = (unsigned long long)((double)amount * scale);
	a -= a % unit;
	return a < least ? least : a;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--cat") == 0)
		return cat_main(argc, argv);
	if (argc > 1 && strcmp(argv[1], "--one") == 0)
		return one_main(argc, argv);
	if (argc > 1 && strcmp(argv[1], "--sleeper") == 0)
		return sleeper_main(argc, argv);

	static struct pcase cases[] = {
		{ "write 64 KiB", 64 * KiB, 2048 * MiB, 12,
		  { CH_KERNEL, CH_PP, CH_PP_PEEK, CH_PP_ZC, CH_KERNEL_1M, CH_VMSPLICE, CH_SOCKET,
		    CH_RING_SPIN, CH_RING_PEEK, CH_PP_ZC_1M, CH_PP_ZC_1M_SLEEPER, CH_PP_ZC_1M_POLL },
		  { 0, 5, 10, 10, 0, 0, 0, 0, 0, 0, 0, 0 },
		  { { CH_PP_ZC, CH_VMSPLICE, 1 },
		    { CH_PP_ZC_1M, CH_ICEORYX, 1 },
		    { CH_PP_ZC_1M_SLEEPER, CH_ICEORYX, 1 },
		    { CH_PP_ZC_1M_POLL, CH_ICEORYX, 0 },
		    { CH_PP_ZC_1M, CH_ICEORYX_POLL, 0 } } },
		{ "write 64 B", 64, 24 * MiB, 4, { CH_KERNEL, CH_PP, CH_SOCKET, CH_RING_SPIN },
		  { 0, 10, 0, 0 },
		  { { 0 } } },
		{ "write 1 B", 1, 384 * KiB, 4, { CH_KERNEL, CH_PP, CH_SOCKET, CH_RING_SPIN },
		  { 0, 30, 0, 0 },
		  { { 0 } } },
		{ "ping-pong 1 B", 0, 30000, 8,
		  { CH_KERNEL, CH_PP, CH_PP_NOSPIN, CH_PP_POLL, CH_SOCKET, CH_EVENTFD, CH_RING_FUTEX,
		    CH_RING_SPIN },
		  { 0, 3, 0, 0, 0, 0, 0, 0 },
		  { { CH_PP, CH_ICEORYX_POLL, 1 },
		    { CH_PP_NOSPIN, CH_ICEORYX, 0 },
		    { CH_PP_POLL, CH_ICEORYX, 0 } } },
	};
	struct bench_opts o = { .case_help = "only the cases whose name contains CASE "
	                                     "(\"64 KiB\", \"ping\", \"fan-out\", \"file\")" };

	bench_begin(&o, argc, argv, "bench_procs",
	            " (PP_SHARED) vs kernel pipe, writer process -> reader process");
	bench_pattern(PERIOD, CAT_BUF, 0);
	rep_map();
	printf("reader buffer 64 KiB, default 64 KiB capacity, %s\n", bench_how(&o));
	printf("ratio: to the kernel pipe of the same run (ping-pong: kernel time / this "
	       "time; above 1 is better)\n");

	for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
		struct pcase *c = &cases[ci];
		double med[BENCH_MAX_VARIANTS];
		char amt[48];

		if (o.only && !strstr(c->name, o.only))
			continue;
		struct case_run cr = { c, 0, o.scale };
		if (c->wsize) {
			cr.amount = scaled(c->amount, o.scale, c->wsize, c->wsize);
			fmt_amount(amt, sizeof amt, cr.amount);
		} else {
			cr.amount = scaled(c->amount, o.scale, 1, 100);
			snprintf(amt, sizeof amt, "%llu round trips", cr.amount);
		}
		printf("\n%s, %s per run\n", c->name, amt);
		fflush(stdout);
		if ((!c->wsize || c->wsize == 64 * KiB) && iox_start()) {
			c->v[c->n++] = CH_ICEORYX;
			c->v[c->n++] = CH_ICEORYX_POLL;
		}
		memset(case_cpu_n, 0, sizeof case_cpu_n);
		bench_medians(c->n, o.reps, o.scale, run_case, &cr, med);
		iox_stop();
		for (int v = 0; v < c->n; v++)
			row(chan_name[c->v[v]], med[v], med[0], median(case_cpu[v], case_cpu_n[v]),
			    !c->wsize, c->target[v]);
		for (const struct versus *vs = c->vs; vs->a; vs++)
			versus(c, med, vs);
		if (c->wsize == 64 * KiB) {
			double cap;
			unsigned long long total = scaled(4096 * MiB, o.scale, 64 * KiB, 64 * KiB);
			bench_medians(1, o.reps, o.scale, run_memcpy, &total, &cap);
			row("memcpy 64 KiB, one thread (a cap)", cap, med[0], -1, 0, 0);
		} else if (c->wsize) {
			double cap[2];
			bench_medians(2, o.reps, o.scale, run_alone, &cr, cap);
			row("pp_write alone, PP_SHARED (a cap)", cap[0], med[0], -1, 0, 0);
			row("pp_write alone, private pipe", cap[1], med[0], -1, 0, 0);
		}
	}

	if (!o.only || strstr("fan-out to 4 reader processes", o.only))
		fanout_case(&o);

	if (!o.only || strstr("file | cat", o.only)) {
		struct file_case fc;
		double med[F_COUNT];
		char amt[48];
		int fd = make_file(&fc, scaled(FILE_SIZE, o.scale, CAT_BUF, CAT_BUF));
		fmt_amount(amt, sizeof amt, fc.size);
		printf("\nfile | cat: a %s file on tmpfs -> process -> pipe -> process -> "
		       "/dev/null,\n128 KiB reads and writes, timed from the first fork to the "
		       "last exit\n",
		       amt);
		fflush(stdout);
		bench_medians(F_COUNT, o.reps, o.scale, run_file, &fc, med);
		for (int v = 0; v < F_COUNT; v++)
			row(file_name[v], med[v], med[0], -1, 0, 0);
		close(fd);
		close(fc.devnull);
	}

	printf("\n");
	munmap(rep, sizeof *rep);
	return bench_finish("every run delivered its exact byte count, sampled contents "
	                    "matched, every echo matched");
}
