/*
 * vmsplice_producer.c - the classic zero-copy producer: a ring of 8
 * buffers, each reused only after its release, 64 MiB (PP_VMSPLICE_MB,
 * times PP_TEST_SCALE) through a 1 MiB pipe (so the producer waits for
 * releases, not room) to a consumer thread that checks every byte.  The
 * producer rewrites a buffer the moment it is released, so a release
 * that comes before the consumer copied the bytes out shows as wrong
 * data.
 * After every case: no pool page in use, no callback with a foreign arg
 * (vmsplice.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "vmsplice.h"

#define PBUFS 8
#define PBUF_SIZE (64 * 1024 + 64)

/* Byte k of the stream. */
static inline unsigned char pat(uint64_t k)
{
	uint64_t x = (k >> 3) * 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	return (unsigned char)(x >> (8 * (k & 7)));
}

struct prod;
struct pslot {
	struct prod *pr;
	int idx;
	unsigned char *mem;
	int outstanding;  /* segments not yet released (guarded by pr->mu) */
	const void *base[2]; /* the segments in flight */
};

struct prod {
	struct pp_end *p[2];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pslot slot[PBUFS];
	uint64_t total;
	long segs_sent, releases, short_calls;
	atomic_int bad;
	uint64_t rng;
};

static void prod_release(void *arg, const struct iovec *iov)
{
	struct pslot *s = arg;
	struct prod *pr = s->pr;
	/* The buffer is the producer's again: scribble on it at once, so a
	 * release that comes before a reader has copied the bytes out shows
	 * as wrong data even when the producer is slow to reuse it. */
	memset(iov->iov_base, 0xEE, iov->iov_len);
	pthread_mutex_lock(&pr->mu);
	if (iov->iov_base != s->base[0] && iov->iov_base != s->base[1])
		atomic_fetch_add(&pr->bad, 1);
	if (--s->outstanding < 0)
		atomic_fetch_add(&pr->bad, 1);
	pr->releases++;
	pthread_cond_broadcast(&pr->cv);
	pthread_mutex_unlock(&pr->mu);
}

static void *producer_main(void *arg)
{
	struct prod *pr = arg;
	uint64_t k = 0;
	for (long seq = 0; k < pr->total; seq++) {
		struct pslot *s = &pr->slot[seq % PBUFS];
		pthread_mutex_lock(&pr->mu);
		while (s->outstanding)
			pthread_cond_wait(&pr->cv, &pr->mu);
		pthread_mutex_unlock(&pr->mu);

		/* A random length and alignment, cut in two segments. */
		pr->rng = pr->rng * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t rv = pr->rng >> 11;
		size_t skew = rv % 64;
		size_t len = 1 + (rv >> 6) % (64 * 1024);
		if (len > pr->total - k)
			len = (size_t)(pr->total - k);
		size_t cut = (rv >> 24) % (len + 1);
		unsigned char *b = s->mem + skew;
		for (size_t i = 0; i < len; i++)
			b[i] = pat(k + i);
		size_t done = 0;
		while (done < len) {
			struct iovec iov[2];
			int n = 0;
			if (done < cut)
				iov[n++] = (struct iovec){ b + done, cut - done };
			iov[n++] = (struct iovec){ b + (done > cut ? done : cut),
			                           len - (done > cut ? done : cut) };
			pthread_mutex_lock(&pr->mu);
			s->base[0] = iov[0].iov_base;
			s->base[1] = n > 1 ? iov[1].iov_base : iov[0].iov_base;
			for (int i = 0; i < n; i++)
				s->outstanding += iov[i].iov_len > 0;
			pthread_mutex_unlock(&pr->mu);
			ssize_t r = pp_vmsplice(pr->p[1], iov, (unsigned long)n, 0, prod_release, s);
			if (r <= 0) {
				atomic_fetch_add(&pr->bad, 1);
				fprintf(stderr, "producer: vmsplice %zd errno %d\n", r, errno);
				return NULL;
			}
			/* Segments that got nothing have no release coming. */
			pthread_mutex_lock(&pr->mu);
			size_t at = 0;
			for (int i = 0; i < n; i++) {
				if (iov[i].iov_len && at >= (size_t)r)
					s->outstanding--;
				else if (iov[i].iov_len)
					pr->segs_sent++;
				at += iov[i].iov_len;
			}
			if ((size_t)r < len - done)
				pr->short_calls++;
			pthread_mutex_unlock(&pr->mu);
			done += (size_t)r;
			/* Wait for this call's segments before lending the rest of
			 * the buffer again: keeps base[] unambiguous. */
			if (done < len) {
				pthread_mutex_lock(&pr->mu);
				while (s->outstanding)
					pthread_cond_wait(&pr->cv, &pr->mu);
				pthread_mutex_unlock(&pr->mu);
			}
		}
		k += len;
	}
	pp_close(pr->p[1]);
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct prod *pr = arg;
	static unsigned char buf[65536];
	uint64_t k = 0, rng = 42;
	for (;;) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		size_t want = 1 + (rng >> 33) % sizeof buf;
		ssize_t r = pp_read(pr->p[0], buf, want);
		if (r < 0) {
			atomic_fetch_add(&pr->bad, 1);
			break;
		}
		if (r == 0)
			break;
		t_progress();
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != pat(k + (uint64_t)i)) {
				if (atomic_fetch_add(&pr->bad, 1) < 5)
					fprintf(stderr, "consumer: byte %llu is %u, want %u\n",
					        (unsigned long long)(k + (uint64_t)i), buf[i],
					        pat(k + (uint64_t)i));
				break;
			}
		k += (uint64_t)r;
	}
	if (k != pr->total) {
		fprintf(stderr, "consumer: got %llu bytes, want %llu\n", (unsigned long long)k,
		        (unsigned long long)pr->total);
		atomic_fetch_add(&pr->bad, 1);
	}
	return NULL;
}

static void threaded_producer(void)
{
	static struct prod pr;
	long mb = t_env_long("PP_VMSPLICE_MB", t_scaled(64));
	if (mb < 1)
		mb = t_scaled(64);
	pr.total = (uint64_t)mb << 20;
	pr.rng = 7;
	pthread_mutex_init(&pr.mu, NULL);
	pthread_cond_init(&pr.cv, NULL);
	for (int i = 0; i < PBUFS; i++) {
		pr.slot[i] = (struct pslot){ .pr = &pr, .idx = i, .mem = malloc(PBUF_SIZE) };
	}
	if (mkpipe(pr.p, 0) == 0) {
		/* Room for all 8 buffers: the producer waits for releases, not
		 * for room, and rewrites a buffer the moment it is released. */
		CHECK_EQ(pp_setsize(pr.p[1], 1 << 20), 1 << 20);
		pthread_t tp, tc;
		double t0 = t_now();
		CHECK_EQ(pthread_create(&tc, NULL, consumer_main, &pr), 0);
		CHECK_EQ(pthread_create(&tp, NULL, producer_main, &pr), 0);
		pthread_join(tp, NULL);
		pthread_join(tc, NULL);
		fprintf(stderr, "threaded_producer: %ld MiB in %.2f s, %ld segments, %ld short calls\n",
		        mb, t_now() - t0, pr.segs_sent, pr.short_calls);
		CHECK_EQ(pp_close(pr.p[0]), 0);
	}
	CHECK_EQ(atomic_load(&pr.bad), 0);
	CHECK_EQ(pr.releases, pr.segs_sent);
	CHECK(pr.segs_sent > 0);
	for (int i = 0; i < PBUFS; i++) {
		CHECK_EQ(pr.slot[i].outstanding, 0);
		free(pr.slot[i].mem);
	}
	pthread_mutex_destroy(&pr.mu);
	pthread_cond_destroy(&pr.cv);
}

int main(void)
{
	t_around_cases(NULL, vmsplice_case_end);
	RUN(threaded_producer);
	return T_DONE();
}
