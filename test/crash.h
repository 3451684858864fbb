/*
 * crash.h - what the crash tests (crash_writers, crash_readers, crash_lock,
 * crash_all_die) share: processes that hold a PP_SHARED pipe are killed
 * (SIGKILL) at random instants and the survivors check what they see.
 *
 *   - shared memory for results: cr_shared() maps MAP_SHARED anonymous
 *     memory, which a forked child writes and the test reads after the
 *     child is gone (a killed child's stores stay);
 *   - self-checking records of 16..PP_PIPE_BUF bytes: a header (magic,
 *     writer, length, sequence number, a hash of those) and payload bytes
 *     that follow from the header, so a torn, mixed or shifted record shows;
 *     cr_parse() takes them out of a byte stream;
 *   - bounded waits for children: cr_reap() waits for one with a deadline
 *     and kills it (and fails) past it;
 *   - random numbers (xorshift, seed from PP_CRASH_SEED or the clock, said
 *     on stderr so that a failing run's choices can be repeated);
 *   - latencies: cr_lat_add() records one in shared memory, cr_lat_report()
 *     prints count, median and max on stderr.
 */
#ifndef PP_TEST_CRASH_H
#define PP_TEST_CRASH_H

#include "harness/harness.h"
#include "pagepipe.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* ---- shared memory ------------------------------------------------------ */

static inline void *cr_shared(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("crash: mmap");
		exit(2);
	}
	return p;
}

/* Checks in forked children, whose own t_case_failed the test never sees:
 * a failure is said on stderr and counted in *cr_fails (shared memory,
 * set up by cr_start), which the test process CHECKs at the end. */
static atomic_int *cr_fails;

#define CR_CHECK(cond)                                                       \
	do {                                                                     \
		if (!(cond)) {                                                       \
			int e_ = errno;                                                  \
			fprintf(stderr, "%s:%d: [pid %d] CHECK failed: %s (errno %d: %s)\n", \
			        __FILE__, __LINE__, (int)getpid(), #cond, e_, strerror(e_)); \
			atomic_fetch_add(cr_fails, 1);                                   \
		}                                                                    \
	} while (0)

/* ---- random numbers ----------------------------------------------------- */

static uint64_t cr_rng_state;

static inline void cr_seed(const char *test)
{
	if (!cr_fails)
		cr_fails = cr_shared(sizeof *cr_fails);
	uint64_t s = (uint64_t)t_env_long("PP_CRASH_SEED", 0);
	if (!s)
		s = (uint64_t)(t_now() * 1e9) ^ ((uint64_t)getpid() << 32);
	fprintf(stderr, "  %s: PP_CRASH_SEED=%llu\n", test, (unsigned long long)s);
	cr_rng_state = s | 1;
}

/* After fork: the child's own sequence. */
static inline void cr_reseed(uint64_t salt)
{
	cr_rng_state = (cr_rng_state ^ (salt * 0x9e3779b97f4a7c15ull)) | 1;
}

static inline uint64_t cr_rand(void)
{
	uint64_t x = cr_rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return cr_rng_state = x;
}

/* Uniform in [0, n). */
static inline uint64_t cr_below(uint64_t n)
{
	return n ? cr_rand() % n : 0;
}

/* A delay for a kill: often none, often short, sometimes long, so that
 * kills land at every step of a call (and of a fork), in microseconds. */
static inline long cr_kill_delay_us(long longest)
{
	switch (cr_below(4)) {
	case 0: return 0;
	case 1: return (long)cr_below(200);
	case 2: return (long)cr_below(2000);
	default: return (long)cr_below((uint64_t)longest + 1);
	}
}

static inline void cr_sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* ---- records -------------------------------------------------------------- */

#define CR_MAGIC 0x43524153u /* "CRAS" */

struct cr_rec {
	uint32_t magic;
	uint16_t writer;
	uint16_t len; /* the whole record, header included */
	uint32_t seq;
	uint32_t sum;
};

static inline uint32_t cr_sum(uint32_t writer, uint32_t len, uint32_t seq)
{
	uint32_t h = 2166136261u;
	h = (h ^ writer) * 16777619u;
	h = (h ^ len) * 16777619u;
	h = (h ^ seq) * 16777619u;
	return h;
}

static inline unsigned char cr_byte(uint32_t writer, uint32_t seq, uint32_t i)
{
	return (unsigned char)(seq * 131u + writer * 7u + i * 13u + (i >> 8));
}

/* Fill buf with record seq of writer, len bytes (16..PP_PIPE_BUF). */
static inline void cr_make(unsigned char *buf, uint32_t writer, uint32_t seq, uint32_t len)
{
	struct cr_rec h = { CR_MAGIC, (uint16_t)writer, (uint16_t)len, seq,
	                    cr_sum(writer, len, seq) };
	memcpy(buf, &h, sizeof h);
	for (uint32_t i = sizeof h; i < len; i++)
		buf[i] = cr_byte(writer, seq, i);
}

/* A record length: small ones often, up to PP_PIPE_BUF. */
static inline uint32_t cr_len(void)
{
	if (cr_below(2))
		return (uint32_t)(sizeof(struct cr_rec) + cr_below(64));
	return (uint32_t)(sizeof(struct cr_rec) + cr_below(PP_PIPE_BUF - sizeof(struct cr_rec) + 1));
}

/* A reader's record stream: bytes in, whole records checked out. */
#define CR_WRITERS 16
struct cr_stream {
	unsigned char buf[2 * PP_PIPE_BUF + 65536];
	size_t have;
	uint32_t next[CR_WRITERS]; /* each writer's next sequence number */
	long records;
	int bad; /* a torn, corrupt or out-of-order record was seen */
};

/* Check and take the whole records in s->buf; false at the first bad one
 * (said on stderr). */
static inline bool cr_parse(struct cr_stream *s, int nwriters)
{
	size_t at = 0;
	while (s->have - at >= sizeof(struct cr_rec)) {
		struct cr_rec h;
		memcpy(&h, s->buf + at, sizeof h);
		if (h.magic != CR_MAGIC || h.writer >= nwriters || h.len < sizeof h ||
		    h.len > PP_PIPE_BUF || h.sum != cr_sum(h.writer, h.len, h.seq)) {
			fprintf(stderr, "crash: bad record header at stream byte %zu (magic %#x"
			        " writer %u len %u seq %u)\n", at, h.magic, h.writer, h.len, h.seq);
			s->bad = 1;
			return false;
		}
		if (s->have - at < h.len)
			break;
		for (uint32_t i = sizeof h; i < h.len; i++)
			if (s->buf[at + i] != cr_byte(h.writer, h.seq, i)) {
				fprintf(stderr, "crash: torn record: writer %u seq %u byte %u\n",
				        h.writer, h.seq, i);
				s->bad = 1;
				return false;
			}
		if (h.seq != s->next[h.writer]) {
			fprintf(stderr, "crash: writer %u: record %u after %u\n", h.writer, h.seq,
			        s->next[h.writer]);
			s->bad = 1;
			return false;
		}
		s->next[h.writer]++;
		s->records++;
		at += h.len;
	}
	memmove(s->buf, s->buf + at, s->have - at);
	s->have -= at;
	return true;
}

/* ---- children ------------------------------------------------------------ */

/* Wait for child pid for at most `seconds`; past that kill it and say so
 * (false).  *status gets its wait status. */
static inline bool cr_reap(pid_t pid, double seconds, int *status)
{
	double until = t_now() + seconds;
	int st = 0;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			st = -1;
			break;
		}
		if (t_now() > until) {
			fprintf(stderr, "crash: child %d still there after %.1f s: killed\n", (int)pid,
			        seconds);
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			if (status)
				*status = st;
			return false;
		}
		cr_sleep_us(1000);
	}
	if (status)
		*status = st;
	return true;
}

/* A child that ended by itself with status 0. */
static inline bool cr_reap_ok(pid_t pid, double seconds)
{
	int st;
	return cr_reap(pid, seconds, &st) && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* ---- latencies -------------------------------------------------------------- */

struct cr_lat {
	atomic_long n;
	double v[8192];
};

static inline void cr_lat_add(struct cr_lat *l, double seconds)
{
	long i = atomic_fetch_add(&l->n, 1);
	if (i < (long)(sizeof l->v / sizeof l->v[0]))
		l->v[i] = seconds;
}

static int cr_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Print "what: n, median, max" and return the max (0 if none). */
static inline double cr_lat_report(struct cr_lat *l, const char *what)
{
	long n = atomic_load(&l->n);
	if (n > (long)(sizeof l->v / sizeof l->v[0]))
		n = (long)(sizeof l->v / sizeof l->v[0]);
	if (!n)
		return 0;
	qsort(l->v, (size_t)n, sizeof l->v[0], cr_cmp_double);
	fprintf(stderr, "  %s: %ld measured, median %.1f ms, max %.1f ms\n", what, n,
	        l->v[n / 2] * 1e3, l->v[n - 1] * 1e3);
	return l->v[n - 1];
}

/* CPU time (user + system) of the calling thread, in seconds. */
static inline double cr_cpu_thread(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* How long a soak asks the crash tests to run (PP_SOAK_SECONDS), 0 when
 * none: they then run their scaled count of rounds, or for that long,
 * whichever is more. */
static inline double cr_soak_seconds(void)
{
	return (double)t_env_long("PP_SOAK_SECONDS", 0);
}

/* A blocking call must end within this: EINTR from SIGALRM (a handler
 * without SA_RESTART) says it hung. */
static void cr_on_alarm(int sig)
{
	(void)sig;
}

static inline void cr_alarm_handler(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = cr_on_alarm;
	sigaction(SIGALRM, &sa, NULL);
}

#endif
