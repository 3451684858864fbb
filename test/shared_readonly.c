/*
 * shared_readonly.c - what a process holding only the read end of a
 * shared pipe (PP_SHARED, imported with pp_import) can and cannot do to
 * the bytes the pipe delivers to other readers (docs/design.md section 13,
 * "Trust").
 *
 * The reader is a forked child that closes the ends fork gave it and
 * imports an exported read end, so its view of the pipe is a read end's:
 *   - data_pages_mapped_read_only: its mapping of the data memory is
 *     read-only: a store to it faults (SIGSEGV), mprotect and a new
 *     writable mapping of its data descriptor fail with EACCES; the writer
 *     then reads back exactly what it wrote;
 *   - data_memfd_not_reopened_writable: it cannot open its data memfd
 *     again for writing through /proc/self/fd (EACCES: mode 0400), nor
 *     change its mode when it is another user (EPERM); the memfd is sealed
 *     against shrinking, and its read-only descriptor cannot truncate it or
 *     punch holes in it.  (A root reader would pass the mode check, so
 *     there the reader drops to user nobody first; a reader running as the
 *     pipe's owner could chmod the memfd: see the design document.)
 *   - ctl_corruption_is_eio: the control memory is read-write for every
 *     holder, so the reader can write anything there.  Each of the
 *     rewrites the checks exist for (a slot's page past the data, its
 *     length past its page, page 0, the slot geometry, head running past
 *     the ring, the ring's capacity) makes the other reader's next read
 *     fail with EIO, never return other bytes;
 *   - ctl_scribbles_deliver_written_bytes: random garbage written over the
 *     header, ring, slots, page table and holders while the parent writes
 *     and reads: every call returns within its bound with data, EAGAIN,
 *     EPIPE or EIO, and every byte the parent reads is one the writer wrote
 *     (its bytes are letters; a page never written reads as 0).  A reader
 *     can make the others see bytes again, out of order or not at all (see
 *     the design document: it must be able to consume), but not bytes no
 *     writer wrote.
 *   - racing_peer_cannot_hold_a_call: a reader that ignores the lock and
 *     moves head far past tail while the other reads cannot keep a call
 *     longer than its bound;
 *   - ready_flood_cannot_hold_a_call: nor can one that floods pp_fd's
 *     readiness pipe, which the other's emptying read drains.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "end.h"
#include "harness/harness.h"
#include "pagepipe.h"

/* The writer's bytes: letters, never 0. */
static unsigned char ro_byte(uint64_t i)
{
	return (unsigned char)('a' + (uint32_t)(i * 2654435761u >> 7) % 26);
}

static void ro_fill(unsigned char *p, size_t n, uint64_t at)
{
	for (size_t i = 0; i < n; i++)
		p[i] = ro_byte(at + i);
}

/* A shared pipe with `pages` pages of the writer's bytes in it, and an
 * exported descriptor of its read end. */
static int ro_pipe(struct pp_end *ends[2], int pages, int *xfd)
{
	if (pp_pipe(ends, PP_SHARED | PP_NONBLOCK | PP_NOSIGPIPE) != 0)
		return -1;
	static unsigned char buf[4 * PP_PAGE_SIZE];
	size_t n = (size_t)pages * PP_PAGE_SIZE;
	ro_fill(buf, n, 0);
	if (pp_write(ends[1], buf, n) != (ssize_t)n)
		return -1;
	*xfd = pp_export(ends[0]);
	return *xfd >= 0 ? 0 : -1;
}

/* The forked reader's handle, closed when it is done. */
static struct pp_end *ro_r;

/* In a forked child: let go of what fork gave it and hold only the
 * exported read end.  NULL when that failed. */
static struct pp_end *ro_reader_only(struct pp_end *ends[2], int xfd)
{
	pp_close(ends[0]);
	pp_close(ends[1]);
	ro_r = pp_import(xfd);
	if (!ro_r || !ro_r->shm || ro_r->shm->m->data_rw)
		return NULL;
	return ro_r;
}

/* The forked reader: fn's result as its exit status. */
__attribute__((noreturn)) static void ro_reader_run(int (*fn)(void *), void *arg)
{
	int st = fn(arg);
	if (ro_r)
		pp_close(ro_r);
	_exit(st);
}

/* Run fn in a forked child; its exit status (0: all held; else the number
 * of the check that failed), or -1 when it died of a signal. */
static int ro_child(int (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		ro_reader_run(fn, arg);
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -2;
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "the reader died of signal %d\n", WTERMSIG(st));
		return -1;
	}
	if (WEXITSTATUS(st))
		fprintf(stderr, "the reader's check %d failed\n", WEXITSTATUS(st));
	return WEXITSTATUS(st);
}

struct ro_arg {
	struct pp_end **ends;
	int xfd;
	unsigned seed;
	double secs;
	int what;
};

/* ---- the data mapping ------------------------------------------------------- */

static void ro_segv(int sig)
{
	(void)sig;
	_exit(0); /* the store faulted: what the case wants */
}

static int ro_store(void *p)
{
	struct ro_arg *a = p;
	struct pp_end *r = ro_reader_only(a->ends, a->xfd);
	if (!r)
		return 1;
	struct iovec iov[2];
	if (pp_peek(r, iov, 2) != 2) /* maps the pages, points into them */
		return 2;
	unsigned char *at = iov[1].iov_base;
	unsigned char *page = (unsigned char *)((uintptr_t)at & ~(uintptr_t)(PP_PAGE_SIZE - 1));
	if (at[0] != ro_byte(PP_PAGE_SIZE))
		return 3;
	if (mprotect(page, PP_PAGE_SIZE, PROT_READ | PROT_WRITE) == 0 || errno != EACCES)
		return 4;
	void *m = mmap(NULL, PP_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, r->shm->m->data_fd,
	               PP_PAGE_SIZE);
	if (m != MAP_FAILED || errno != EACCES)
		return 5;
	if (pwrite(r->shm->m->data_fd, "X", 1, PP_PAGE_SIZE) != -1 || errno != EBADF)
		return 6;
	struct sigaction sa = { .sa_handler = ro_segv };
	sigaction(SIGSEGV, &sa, NULL);
	*(volatile unsigned char *)at = 'X';
	return 7; /* the store went through */
}

static void data_pages_mapped_read_only(void)
{
	struct pp_end *ends[2];
	int xfd = -1;
	CHECK(ro_pipe(ends, 3, &xfd) == 0);
	struct ro_arg a = { .ends = ends, .xfd = xfd };
	CHECK_EQ(ro_child(ro_store, &a), 0);
	static unsigned char got[3 * PP_PAGE_SIZE], want[3 * PP_PAGE_SIZE];
	ro_fill(want, sizeof want, 0);
	CHECK_EQ(pp_read(ends[0], got, sizeof got), (ssize_t)sizeof got);
	CHECK(memcmp(got, want, sizeof got) == 0);
	close(xfd);
	CHECK_EQ(pp_close(ends[0]), 0);
	CHECK_EQ(pp_close(ends[1]), 0);
}

/* ---- the data memfd ----------------------------------------------------------- */

static int ro_reopen(void *p)
{
	struct ro_arg *a = p;
	struct pp_end *r = ro_reader_only(a->ends, a->xfd);
	if (!r)
		return 1;
	int fd = r->shm->m->data_fd;
	bool root = geteuid() == 0;
	/* Root passes every mode check: be a reader of another user. */
	if (root && (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0 ||
	             prctl(PR_SET_DUMPABLE, 1) != 0))
		return 2;
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	if (open(path, O_RDWR) != -1 || errno != EACCES)
		return 3;
	if (open(path, O_WRONLY) != -1 || errno != EACCES)
		return 4;
	if (root && (fchmod(fd, 0600) != -1 || errno != EPERM))
		return 5;
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || !(seals & F_SEAL_SEAL))
		return 6;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) != -1)
		return 7;
	if (ftruncate(fd, 0) != -1)
		return 8;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, PP_PAGE_SIZE, PP_PAGE_SIZE) != -1)
		return 9;
	return 0;
}

static void data_memfd_not_reopened_writable(void)
{
	struct pp_end *ends[2];
	int xfd = -1;
	CHECK(ro_pipe(ends, 2, &xfd) == 0);
	struct ro_arg a = { .ends = ends, .xfd = xfd };
	CHECK_EQ(ro_child(ro_reopen, &a), 0);
	static unsigned char got[2 * PP_PAGE_SIZE], want[2 * PP_PAGE_SIZE];
	ro_fill(want, sizeof want, 0);
	CHECK_EQ(pp_read(ends[0], got, sizeof got), (ssize_t)sizeof got);
	CHECK(memcmp(got, want, sizeof got) == 0);
	close(xfd);
	CHECK_EQ(pp_close(ends[0]), 0);
	CHECK_EQ(pp_close(ends[1]), 0);
}

/* ---- the ctl memory ------------------------------------------------------------- */

/* The slot at tail, in the area in use. */
static struct ppi_buf *ro_tail_slot(struct pp_end *r)
{
	uint32_t geom = atomic_load_explicit(&r->shm->rx->geom, memory_order_relaxed);
	uint32_t tail = atomic_load_explicit(&r->shm->ring->tail, memory_order_relaxed);
	return ppi_shm_slots(r->shm, geom >> 8) + (tail & ((1u << (geom & 0xff)) - 1));
}

enum { RO_PAGE_PAST, RO_PAGE_ZERO, RO_LEN_PAST, RO_OFFSET_PAST, RO_GEOM, RO_HEAD, RO_CAPACITY,
       RO_CASES };
static const char *const ro_case_names[RO_CASES] = {
	"slot page past the data", "slot page 0", "slot length past its page",
	"slot offset and length past its page", "slot geometry", "head past the ring", "capacity 0",
};

static int ro_corrupt(void *p)
{
	struct ro_arg *a = p;
	struct pp_end *r = ro_reader_only(a->ends, a->xfd);
	if (!r)
		return 1;
	struct ppi_buf *b = ro_tail_slot(r);
	switch (a->what) {
	case RO_PAGE_PAST: __atomic_store_n(&b->page, 100000u, __ATOMIC_RELAXED); break;
	case RO_PAGE_ZERO: __atomic_store_n(&b->page, 0u, __ATOMIC_RELAXED); break;
	case RO_LEN_PAST: __atomic_store_n(&b->len, PP_PAGE_SIZE + 1u, __ATOMIC_RELAXED); break;
	case RO_OFFSET_PAST:
		__atomic_store_n(&b->span, (uint64_t)PP_PAGE_SIZE << 32 | 1u, __ATOMIC_RELAXED);
		break;
	case RO_GEOM: atomic_store(&r->shm->rx->geom, 0x3ffu); break;
	case RO_HEAD: atomic_fetch_add(&r->shm->ring->head, 1000u); break;
	default: atomic_store(&r->shm->ring->max_usage, 0u); break;
	}
	return 0;
}

static void ctl_corruption_is_eio(void)
{
	for (int what = 0; what < RO_CASES; what++) {
		struct pp_end *ends[2];
		int xfd = -1;
		CHECK(ro_pipe(ends, 2, &xfd) == 0);
		struct ro_arg a = { .ends = ends, .xfd = xfd, .what = what };
		CHECK_EQ(ro_child(ro_corrupt, &a), 0);
		static unsigned char got[2 * PP_PAGE_SIZE];
		memset(got, 0, sizeof got);
		ssize_t n = pp_read(ends[0], got, sizeof got);
		if (n != -1 || errno != EIO)
			fprintf(stderr, "%s: the other reader's read returned %zd (%s)\n",
			        ro_case_names[what], n, n < 0 ? strerror(errno) : "data");
		CHECK(n == -1 && errno == EIO);
		/* Broken for good: every call fails, nothing is delivered. */
		CHECK_ERR(pp_read(ends[0], got, sizeof got), EIO);
		CHECK_ERR(pp_write(ends[1], got, 1), EIO);
		close(xfd);
		pp_close(ends[0]);
		pp_close(ends[1]);
	}
}

/* Random garbage over the parts of the ctl memory the pipe uses. */
static int ro_scribble(void *p)
{
	struct ro_arg *a = p;
	struct pp_end *r = ro_reader_only(a->ends, a->xfd);
	if (!r)
		return 1;
	unsigned char *ctl = (unsigned char *)r->shm->hdr;
	uint64_t s = a->seed * 0x9e3779b97f4a7c15ull + 1;
	double end = t_now() + a->secs;
	for (unsigned k = 0; t_now() < end; k++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t x = (uint32_t)(s >> 33), y = (uint32_t)(s >> 7);
		size_t off;
		switch (x % 6) {
		case 0: off = x >> 8 & 0x7c; break; /* header, lock included */
		case 1: off = PPI_SHM_RING_OFF + (x >> 8 & 0x7c); break;
		case 2: off = PPI_SHM_SLOTS_OFF + (x >> 8 & 1) * PPI_SHM_SLOTS_SIZE + (x >> 9 & 0x3fc);
			break;
		case 3: off = PPI_SHM_PAGES_OFF + (x >> 8 & 0x1fc); break;
		case 4: off = PPI_SHM_HOLDERS_OFF + (x >> 8 & 0x1fc); break;
		default: off = PPI_SHM_DESCS_OFF + (x >> 8 & 0x7c); break;
		}
		uint32_t *w = (uint32_t *)(ctl + off), old = __atomic_load_n(w, __ATOMIC_RELAXED), v;
		switch (y % 6) {
		case 0: v = 0; break;
		case 1: v = old + 1; break;
		case 2: v = old - 1; break;
		case 3: v = y >> 3 & 0xff; break;
		case 4: v = old ^ (1u << (y >> 27)); break;
		default: v = y; break;
		}
		/* Not the lock often (a live owner holds every call up for a
		 * second), and the status flags keep PP_NONBLOCK (a reader may
		 * legitimately change them: they are the description's). */
		if (off == offsetof(struct ppi_shm_hdr, lock) && y % 64)
			continue;
		if (off >= PPI_SHM_DESCS_OFF && off < PPI_SHM_HOLDERS_OFF && (off & 15) == 8)
			v |= PP_NONBLOCK;
		__atomic_store_n(w, v, __ATOMIC_RELAXED);
		if (k % 16 == 15)
			usleep(50);
	}
	return 0;
}

static void ctl_scribbles_deliver_written_bytes(void)
{
	int rounds = (int)t_scaled(6);
	if (rounds < 2)
		rounds = 2;
	long eio = 0, bytes_read = 0;
	for (int round = 0; round < rounds; round++) {
		struct pp_end *ends[2];
		int xfd = -1;
		CHECK(ro_pipe(ends, 1, &xfd) == 0);
		struct ro_arg a = { .ends = ends, .xfd = xfd, .seed = (unsigned)round + 1, .secs = 0.25 };
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0)
			ro_reader_run(ro_scribble, &a);
		CHECK(pid > 0);
		/* The other reader, and the writer: until the scribbler is done
		 * or the pipe is found corrupt. */
		static unsigned char buf[3 * PP_PAGE_SIZE];
		uint64_t wpos = PP_PAGE_SIZE;
		double bound = t_valgrind() ? 20.0 : 4.0;
		bool broken = false;
		int st = 0;
		while (!broken && waitpid(pid, &st, WNOHANG) == 0) {
			size_t n = 1 + (size_t)(wpos * 7919 % sizeof buf);
			ro_fill(buf, n, wpos);
			double t0 = t_now();
			ssize_t w = pp_write(ends[1], buf, n);
			int werr = errno;
			memset(buf, 0, sizeof buf);
			ssize_t got = pp_read(ends[0], buf, sizeof buf);
			int rerr = errno;
			double took = t_now() - t0;
			CHECK(took < bound);
			CHECK(w >= 0 || werr == EAGAIN || werr == EPIPE || werr == EIO || werr == ENOMEM);
			CHECK(got >= 0 || rerr == EAGAIN || rerr == EIO);
			if (w > 0)
				wpos += (uint64_t)w;
			for (ssize_t i = 0; i < got; i++)
				if (buf[i] && (buf[i] < 'a' || buf[i] > 'z')) {
					fprintf(stderr, "round %d: byte %zd of %zd read is %#x\n", round, i,
					        got, buf[i]);
					CHECK(0);
					break;
				}
			bytes_read += got > 0 ? got : 0;
			broken = (w < 0 && werr == EIO) || (got < 0 && rerr == EIO);
			t_progress();
		}
		eio += broken;
		if (broken)
			CHECK(waitpid(pid, &st, 0) == pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		close(xfd);
		pp_close(ends[0]);
		pp_close(ends[1]);
	}
	fprintf(stderr, "  %d rounds: %ld found corrupt, %ld bytes read\n", rounds, eio, bytes_read);
}

/* A peer that ignores the lock: while the other reader's call runs, it
 * keeps every slot a valid empty buffer and moves head far past tail and
 * back, so that what the call reads of head after the lock's checks may
 * be anything.  The broken flag is cleared again and again. */
static int ro_race(void *p)
{
	struct ro_arg *a = p;
	struct pp_end *r = ro_reader_only(a->ends, a->xfd);
	if (!r)
		return 1;
	struct ppi_shm_hdr *hdr = r->shm->hdr;
	struct ppi_ring *ring = r->shm->ring;
	double end = t_now() + a->secs;
	while (t_now() < end)
		for (int k = 0; k < 1000; k++) {
			uint32_t geom = atomic_load(&r->shm->rx->geom);
			struct ppi_buf *b = ppi_shm_slots(r->shm, geom >> 8);
			for (uint32_t i = 0; i < 16; i++) {
				__atomic_store_n(&b[i].page, 1u, __ATOMIC_RELAXED);
				__atomic_store_n(&b[i].flags, 0u, __ATOMIC_RELAXED);
				__atomic_store_n(&b[i].span, 0u, __ATOMIC_RELAXED);
			}
			atomic_store(&r->shm->rx->geom, 4u);
			atomic_store(&hdr->broken, 0u);
			uint32_t tail = atomic_load(&ring->tail);
			atomic_store(&ring->head, tail + (k & 1 ? 0x40000000u : 1u));
		}
	return 0;
}

/* Run `peer`, a hostile reader, in a forked child for secs while this
 * process calls `step` over and over: no step may take longer than its
 * bound, and the child must exit 0.  ready: ask for pp_fd first (the
 * readiness pipes are kept in step from then on). */
static void ro_bounded(int (*peer)(void *), double secs, bool ready,
                       void (*step)(struct pp_end *ends[2]), const char *steps)
{
	struct pp_end *ends[2];
	int xfd = -1;
	CHECK(ro_pipe(ends, 1, &xfd) == 0);
	if (ready)
		CHECK(pp_fd(ends[0]) >= 0);
	struct ro_arg a = { .ends = ends, .xfd = xfd, .secs = secs };
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		ro_reader_run(peer, &a);
	CHECK(pid > 0);
	double bound = t_valgrind() ? 20.0 : 2.0, worst = 0;
	long calls = 0;
	int st = 0;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		double t0 = t_now();
		step(ends);
		double took = t_now() - t0;
		if (took > worst)
			worst = took;
		calls++;
		t_progress();
	}
	fprintf(stderr, "  %ld %s, the longest %.3f s\n", calls, steps, worst);
	CHECK(worst < bound);
	CHECK(calls > 1);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(xfd);
	pp_close(ends[0]);
	pp_close(ends[1]);
}

static void race_step(struct pp_end *ends[2])
{
	static unsigned char buf[PP_PAGE_SIZE];
	ssize_t n = pp_read(ends[0], buf, sizeof buf);
	CHECK(n >= 0 || errno == EAGAIN || errno == EIO);
}

static void racing_peer_cannot_hold_a_call(void)
{
	ro_bounded(ro_race, t_valgrind() ? 2.0 : 0.5, false, race_step, "reads");
}

/* pp_fd's readiness pipe of the read side, filled as fast as the reader
 * can write it: the other reader's read that empties the ring drains that
 * pipe under the lock, and must not stay there while the flood lasts. */
static int ro_flood(void *p)
{
	struct ro_arg *a = p;
	struct pp_end *r = ro_reader_only(a->ends, a->xfd);
	if (!r || r->shm->efd[PPI_READ] < 0)
		return 1;
	/* Two flooders, each writing what one drain read takes: together
	 * they refill faster than a drain empties. */
	pid_t twin = fork();
	static char junk[512];
	double end = t_now() + a->secs;
	while (t_now() < end)
		for (int i = 0; i < 64; i++)
			(void)!write(r->shm->efd[PPI_READ], junk, sizeof junk);
	if (twin == 0)
		_exit(0);
	int st = 0;
	return twin > 0 && waitpid(twin, &st, 0) == twin && st == 0 ? 0 : 2;
}

static void flood_step(struct pp_end *ends[2])
{
	static unsigned char buf[2 * PP_PAGE_SIZE];
	ssize_t w = pp_write(ends[1], "abc", 3);
	CHECK(w == 3 || errno == EAGAIN);
	ssize_t n = pp_read(ends[0], buf, sizeof buf); /* empties it: drains */
	CHECK(n >= 0 || errno == EAGAIN);
}

static void ready_flood_cannot_hold_a_call(void)
{
	ro_bounded(ro_flood, t_valgrind() ? 3.0 : 1.0, true, flood_step, "write and read pairs");
}

int main(void)
{
	RUN(data_pages_mapped_read_only);
	RUN(data_memfd_not_reopened_writable);
	RUN(ctl_corruption_is_eio);
	RUN(ctl_scribbles_deliver_written_bytes);
	RUN(racing_peer_cannot_hold_a_call);
	RUN(ready_flood_cannot_hold_a_call);
	return T_DONE();
}
