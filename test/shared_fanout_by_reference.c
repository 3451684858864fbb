/*
 * shared_fanout_by_reference.c - pipes made in one shared memory by
 * pp_pipe_in: pp_tee, pp_splice and pp_fanout between them move page
 * references, so a stream is held once however many consumer processes
 * read it, each at its own pace; every survivor gets every byte.
 *
 * Rules checked:
 *   - pp_pipe_in's errors: EFAULT, EBADF, EINVAL (flags, a private member),
 *     EACCES (a process that maps the memory read-only), EMFILE once the
 *     memory's 8 pipes exist; a pipe's ring is free again once its last
 *     handle closes (hundreds of pipes made and closed in turn);
 *   - tee to two pipes of the memory adds no page: pp_shared_stats counts
 *     the 16 pages once, while three pipes hold them; they go back to idle
 *     only when the last of the three has been read; splice moves the
 *     pages, never copies; a tee into a pipe of another memory copies;
 *   - fan-out to four reader processes (pp_read in random sizes, pp_peek /
 *     pp_consume, a reader in poll(2) on pp_fd, a slow one), held back
 *     until the fan-out filled their pipes: the data is in memory once;
 *     one reader is killed -9 at a random instant: its pipe gives EPIPE,
 *     the distributor drops it, and the other three get every byte; at
 *     the end every page is back (none in rings, none held);
 *   - an end of a pipe_in pipe exported to a process that holds nothing of
 *     the memory reaches that pipe (not the memory's first pipe);
 *   - pp_pipe_in and pp_import under a descriptor limit that stops them at
 *     each descriptor they open in turn: EMFILE, no descriptor left
 *     behind, no ring taken, and the next call with room works;
 *   - every descriptor opened by a case is closed by its end (hooks).
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"
#include "harness/procs.h"

#define SEED 77u
#define OUTS 4

static struct pp_shared_stats stats_of(struct pp_end *e)
{
	struct pp_shared_stats st;
	memset(&st, 0, sizeof st);
	CHECK_EQ(pp_shared_stats(e, &st), 0);
	return st;
}

/* ---- errors and limits -------------------------------------------------- */

static void errors_and_limits(void)
{
	struct pp_end *s[2], *p[2], *x[2];
	CHECK_EQ(pp_pipe(s, PP_SHARED), 0);
	CHECK_EQ(pp_pipe(p, 0), 0);
	CHECK_ERR(pp_pipe_in(NULL, 0, s[0]), EFAULT);
	CHECK_ERR(pp_pipe_in(x, 0, NULL), EBADF);
	CHECK_ERR(pp_pipe_in(x, 0x4000, s[0]), EINVAL);
	CHECK_ERR(pp_pipe_in(x, 0, p[0]), EINVAL);
	/* Seven more pipes fill the memory's eight rings. */
	struct pp_end *in[7][2];
	for (int i = 0; i < 7; i++)
		CHECK_EQ(pp_pipe_in(in[i], PP_NONBLOCK | PP_SHARED, i % 2 ? s[1] : s[0]), 0);
	CHECK_ERR(pp_pipe_in(x, 0, in[3][0]), EMFILE);
	for (int i = 0; i < 7; i++) {
		CHECK_EQ(pp_getfl(in[i][0]) & PP_NONBLOCK, PP_NONBLOCK);
		char c = (char)('a' + i);
		CHECK_EQ(pp_write(in[i][1], &c, 1), 1);
	}
	for (int i = 0; i < 7; i++) {
		char c = 0;
		CHECK_EQ(pp_read(in[i][0], &c, 1), 1);
		CHECK_EQ(c, (char)('a' + i));
		CHECK_ERR(pp_read(in[i][0], &c, 1), EAGAIN);
	}
	/* A ring closed on both sides is free for the next. */
	CHECK_EQ(pp_close(in[4][0]), 0);
	CHECK_ERR(pp_pipe_in(x, 0, s[0]), EMFILE);
	CHECK_EQ(pp_close(in[4][1]), 0);
	CHECK_EQ(pp_pipe_in(x, 0, s[0]), 0);
	CHECK_EQ(pp_close(x[0]), 0);
	CHECK_EQ(pp_close(x[1]), 0);
	/* Hundreds of pipes, one at a time, with data left in them. */
	for (int i = 0; i < 300 && !t_case_failed; i++) {
		CHECK_EQ(pp_pipe_in(x, 0, in[i % 7 == 4 ? 0 : i % 7][0]), 0);
		CHECK_EQ(pp_write(x[1], "data", 4), 4);
		CHECK_EQ(pp_close(x[1]), 0);
		CHECK_EQ(pp_close(x[0]), 0);
	}
	struct pp_shared_stats st = stats_of(s[0]);
	CHECK_EQ(st.pages_in_ring, 0);
	CHECK_EQ(st.pages_held, 0);
	for (int i = 0; i < 7; i++)
		if (i != 4) {
			CHECK_EQ(pp_close(in[i][0]), 0);
			CHECK_EQ(pp_close(in[i][1]), 0);
		}
	/* A process that maps the memory read-only (it imported a read end,
	 * and holds nothing else of it) may not make pipes in it. */
	int fd = pp_export(s[0]);
	CHECK(fd >= 0);
	CHECK_EQ(pp_close(s[0]), 0);
	CHECK_EQ(pp_close(s[1]), 0);
	struct pp_end *r = pp_import(fd);
	CHECK(r != NULL);
	CHECK_ERR(pp_pipe_in(x, 0, r), EACCES);
	CHECK_EQ(pp_close(r), 0);
	close(fd);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
}

/* ---- one process: tee and splice ---------------------------------------- */

static void fill(struct pp_end *w, size_t n, size_t *pos)
{
	static unsigned char b[65536];
	tp_fill(b, n, SEED, *pos);
	CHECK_EQ(pp_write(w, b, n), (ssize_t)n);
	*pos += n;
}

static void drain(struct pp_end *r, size_t n, size_t *pos)
{
	static unsigned char b[65536];
	size_t got = 0;
	while (got < n && !t_case_failed) {
		ssize_t k = pp_read(r, b, n - got > sizeof b ? sizeof b : n - got);
		CHECK(k > 0);
		if (k <= 0)
			return;
		CHECK_EQ(tp_verify(b, (size_t)k, SEED, *pos + got), -1);
		got += (size_t)k;
	}
	*pos += got;
}

static void tee_holds_pages_once(void)
{
	struct pp_end *a[2], *b[2], *c[2];
	CHECK_EQ(pp_pipe(a, PP_SHARED), 0);
	CHECK_EQ(pp_pipe_in(b, 0, a[1]), 0);
	CHECK_EQ(pp_pipe_in(c, 0, b[0]), 0);
	size_t wpos = 0, ra = 0, rb = 0, rc = 0;
	fill(a[1], 65536, &wpos);
	CHECK_EQ(stats_of(a[0]).pages_in_ring, 16);
	CHECK_EQ(pp_tee(a[0], b[1], 65536, 0), 65536);
	CHECK_EQ(pp_tee(a[0], c[1], 65536, 0), 65536);
	struct pp_shared_stats st = stats_of(c[1]);
	CHECK_EQ(st.pages_in_ring, 16); /* three pipes, one copy */
	CHECK_EQ(pp_nread(b[0]), 65536);
	CHECK_EQ(pp_nread(c[0]), 65536);
	/* Each reader takes its own copy out; the pages stay while another
	 * pipe names them. */
	drain(b[0], 65536, &rb);
	CHECK_EQ(stats_of(a[0]).pages_in_ring, 16);
	drain(a[0], 40000, &ra);
	CHECK_EQ(stats_of(a[0]).pages_in_ring, 16);
	drain(c[0], 65536, &rc);
	CHECK_EQ(stats_of(a[0]).pages_in_ring, 7); /* a's last 25536 bytes */
	drain(a[0], 25536, &ra);
	st = stats_of(a[0]);
	CHECK_EQ(st.pages_in_ring, 0);
	CHECK_EQ(st.pages_held, 0);
	/* A write after a tee never lands in a shared page. */
	fill(a[1], 100, &wpos);
	CHECK_EQ(pp_tee(a[0], b[1], 100, 0), 100);
	fill(a[1], 100, &wpos);
	CHECK_EQ(pp_nread(b[0]), 100);
	drain(b[0], 100, &rb);
	drain(a[0], 200, &ra);
	/* splice moves: b gets a's pages, no page is added. */
	fill(a[1], 65536, &wpos);
	size_t moved = 0;
	while (moved < 65536 && !t_case_failed) {
		ssize_t k = pp_splice(a[0], b[1], 65536 - moved, 0);
		CHECK(k > 0);
		if (k <= 0)
			break;
		moved += (size_t)k;
	}
	CHECK_EQ(pp_nread(a[0]), 0);
	CHECK_EQ(stats_of(a[0]).pages_in_ring, 16);
	rb = ra; /* b now carries a's stream */
	drain(b[0], 65536, &rb);
	CHECK_EQ(stats_of(a[0]).pages_in_ring, 0);
	/* Into a pipe of another memory: copied, and that memory holds them. */
	struct pp_end *o[2];
	CHECK_EQ(pp_pipe(o, PP_SHARED), 0);
	size_t ro = wpos;
	fill(a[1], 8192, &wpos);
	CHECK_EQ(pp_tee(a[0], o[1], 8192, 0), 8192);
	CHECK_EQ(stats_of(o[0]).pages_in_ring, 2);
	CHECK_EQ(stats_of(a[0]).pages_in_ring, 2);
	drain(o[0], 8192, &ro);
	ra = rb;
	drain(a[0], 8192, &ra);
	struct pp_end *all[] = { a[0], a[1], b[0], b[1], c[0], c[1], o[0], o[1] };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		CHECK_EQ(pp_close(all[i]), 0);
	(void)rc;
}

/* ---- fan-out to reader processes ---------------------------------------- */

enum { R_READ, R_PEEK, R_POLL, R_SLOW };

struct reader {
	struct pp_end *r;       /* the read end this process reads */
	struct pp_end *drop[2 * OUTS + 2]; /* the ends it closes first */
	int how;
	size_t total;           /* bytes it must get (0: it may be killed) */
	struct t_sync *sync;
};

static void reader_main(void *arg)
{
	struct reader *a = arg;
	static unsigned char b[1 << 16];
	for (int i = 0; i < 2 * OUTS + 2; i++)
		if (a->drop[i])
			CHECK_EQ(pp_close(a->drop[i]), 0);
	t_post(a->sync, 1, 'r'); /* ready; start reading when told */
	CHECK_EQ(t_wait(a->sync, 1), 'g');
	uint32_t rs = (uint32_t)a->how * 7919u + 1;
	size_t got = 0;
	long bad = -1;
	int fd = a->how == R_POLL ? pp_fd(a->r) : -1;
	if (a->how == R_POLL) {
		CHECK(fd >= 0);
		CHECK_EQ(pp_setfl(a->r, PP_NONBLOCK), 0);
	}
	for (;;) {
		ssize_t k;
		if (a->how == R_PEEK) {
			struct iovec iov[16];
			k = pp_peek(a->r, iov, 16);
			if (k > 0) {
				size_t n = tp_peeked(iov, k, SEED, got, &bad);
				CHECK_EQ(pp_consume(a->r, n), (ssize_t)n);
				got += n;
				continue;
			}
		} else {
			size_t want = 1 + tp_rand(&rs) % sizeof b;
			k = pp_read(a->r, b, want);
			if (k > 0) {
				tp_take(b, (size_t)k, SEED, &got, &bad);
				if (a->how == R_SLOW && tp_rand(&rs) % 8 == 0)
					usleep(200);
				continue;
			}
			if (k < 0 && errno == EAGAIN) {
				struct pollfd p = { .fd = fd, .events = POLLIN };
				CHECK(poll(&p, 1, 10000) == 1);
				continue;
			}
		}
		CHECK_EQ(k, 0);
		break;
	}
	CHECK_EQ(bad, -1);
	if (a->total)
		CHECK_EQ(got, a->total);
	CHECK_EQ(pp_close(a->r), 0);
}

/* Fan the source's bytes out to every output still in `outs` (n of them,
 * output ids[i] at outs[i]), dropping an output whose readers are gone
 * (EPIPE: dropped[id] set); how many are left. */
static int fan(struct pp_end *src, struct pp_end **outs, int *ids, int n, size_t len,
               bool *dropped)
{
	size_t done = 0;
	while (done < len && n > 0 && !t_case_failed) {
		ssize_t k = pp_fanout(src, outs, n, len - done, 0);
		if (k > 0) {
			done += (size_t)k;
			continue;
		}
		CHECK(k < 0 && errno == EPIPE);
		if (!(k < 0 && errno == EPIPE))
			break;
		int kept = 0;
		for (int i = 0; i < n; i++) {
			if (pp_events(outs[i]) & POLLERR) {
				dropped[ids[i]] = true;
				CHECK_EQ(pp_close(outs[i]), 0);
			} else {
				ids[kept] = ids[i];
				outs[kept++] = outs[i];
			}
		}
		CHECK(kept < n);
		if (kept == n)
			break;
		n = kept;
	}
	return n;
}

static void fanout_to_four_processes(void)
{
	size_t total = (size_t)t_scaled_san(64) << 20;
	int rounds = 3;
	if (t_valgrind()) {
		total = 4 << 20; /* four readers checking every byte, 50 times slower */
		rounds = 1;
	}
	uint32_t rs = 12345;
	for (int round = 0; round < rounds && !t_case_failed; round++) {
		struct pp_end *s[2], *o[OUTS][2];
		CHECK_EQ(pp_pipe(s, PP_SHARED), 0);
		for (int i = 0; i < OUTS; i++)
			CHECK_EQ(pp_pipe_in(o[i], 0, s[1]), 0);
		int victim = (int)(tp_rand(&rs) % OUTS);
		struct t_sync sync[OUTS];
		pid_t pid[OUTS];
		struct reader rd[OUTS];
		for (int i = 0; i < OUTS; i++) {
			CHECK_EQ(t_sync_open(&sync[i]), 0);
			memset(&rd[i], 0, sizeof rd[i]);
			rd[i].r = o[i][0];
			rd[i].how = i;
			rd[i].total = i == victim ? 0 : total;
			rd[i].sync = &sync[i];
			int k = 0;
			rd[i].drop[k++] = s[0];
			rd[i].drop[k++] = s[1];
			for (int j = 0; j < OUTS; j++) {
				rd[i].drop[k++] = o[j][1];
				if (j != i)
					rd[i].drop[k++] = o[j][0];
			}
			pid[i] = t_child(reader_main, &rd[i]);
			t_sync_keep(&sync[i], 0);
		}
		for (int i = 0; i < OUTS; i++) {
			CHECK_EQ(t_wait(&sync[i], 0), 'r');
			CHECK_EQ(pp_close(o[i][0]), 0);
		}
		struct pp_end *outs[OUTS];
		int ids[OUTS];
		bool dropped[OUTS] = { false };
		for (int i = 0; i < OUTS; i++) {
			outs[i] = o[i][1];
			ids[i] = i;
		}
		/* Fill every output while no one reads: held once. */
		size_t wpos = 0;
		fill(s[1], 65536, &wpos);
		CHECK_EQ(fan(s[0], outs, ids, OUTS, 65536, dropped), OUTS);
		struct pp_shared_stats st = stats_of(s[0]);
		CHECK_EQ(st.pages_in_ring, 16);
		for (int i = 0; i < OUTS; i++)
			t_post(&sync[i], 0, 'g');
		/* Stream the rest; kill the victim at a random point. */
		size_t kill_at = 65536 + tp_rand(&rs) % (total - 65536);
		int n = OUTS;
		static unsigned char b[65536];
		while (wpos < total && n > 0 && !t_case_failed) {
			size_t k = tp_chunk(b, sizeof b, &rs, SEED, wpos, total);
			CHECK_EQ(pp_write(s[1], b, k), (ssize_t)k);
			wpos += k;
			n = fan(s[0], outs, ids, n, k, dropped);
			if (pid[victim] > 0 && wpos >= kill_at) {
				kill(pid[victim], SIGKILL);
				int status;
				CHECK_EQ(waitpid(pid[victim], &status, 0), pid[victim]);
				pid[victim] = -1;
			}
		}
		/* The victim's output was dropped, unless no fan-out met its
		 * death before the end. */
		CHECK(n == OUTS - 1 || (n == OUTS && !dropped[victim]));
		for (int i = 0; i < n; i++)
			CHECK_EQ(pp_close(outs[i]), 0);
		for (int i = 0; i < OUTS; i++) {
			if (i == victim)
				continue;
			CHECK(!dropped[i]);
			t_reap(pid[i]);
			t_sync_close(&sync[i]);
		}
		t_sync_close(&sync[victim]);
		CHECK_EQ(pp_close(s[1]), 0);
		st = stats_of(s[0]);
		CHECK_EQ(st.pages_in_ring, 0);
		CHECK_EQ(st.pages_held, 0);
		CHECK_EQ(st.holders, 1);
		CHECK_EQ(pp_close(s[0]), 0);
	}
}

/* ---- export and import -------------------------------------------------- */

struct importer {
	int fd;
	struct pp_end *drop[4];
};

static void importer_main(void *arg)
{
	struct importer *a = arg;
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pp_close(a->drop[i]), 0);
	struct pp_end *r = pp_import(a->fd);
	CHECK(r != NULL);
	if (!r)
		return;
	size_t pos = 0;
	drain(r, 5000, &pos);
	char c;
	CHECK_EQ(pp_read(r, &c, 1), 0);
	CHECK_EQ(pp_close(r), 0);
}

static void import_reaches_the_pipe(void)
{
	struct pp_end *s[2], *b[2];
	CHECK_EQ(pp_pipe(s, PP_SHARED), 0);
	CHECK_EQ(pp_pipe_in(b, 0, s[0]), 0);
	CHECK_EQ(pp_write(s[1], "not this pipe", 13), 13);
	int fd = pp_export(b[0]);
	CHECK(fd >= 0);
	struct importer a = { fd, { s[0], s[1], b[0], b[1] } };
	pid_t pid = t_child(importer_main, &a);
	CHECK_EQ(pp_close(b[0]), 0);
	close(fd);
	size_t pos = 0;
	fill(b[1], 5000, &pos);
	CHECK_EQ(pp_close(b[1]), 0);
	t_reap(pid);
	char c[13];
	CHECK_EQ(pp_read(s[0], c, 13), 13);
	CHECK_EQ(memcmp(c, "not this pipe", 13), 0);
	CHECK_EQ(pp_close(s[0]), 0);
	CHECK_EQ(pp_close(s[1]), 0);
}

/* ---- descriptors run out ------------------------------------------------- */

static void fd_limit_at_every_step(void)
{
	struct pp_end *s[2], *x[2];
	CHECK_EQ(pp_pipe(s, PP_SHARED), 0);
	struct rlimit old;
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	int base = tp_count_fds(), made = 0;
	for (int extra = 0; extra < 24 && !t_case_failed; extra++) {
		/* The lowest free descriptors are below base's count here. */
		struct rlimit lim = { (rlim_t)(base + extra), old.rlim_max };
		CHECK_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
		int r = pp_pipe_in(x, 0, s[1]);
		int err = errno;
		CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
		if (r != 0) {
			CHECK_EQ(err, EMFILE);
			CHECK_EQ(tp_count_fds(), base);
			continue;
		}
		made++;
		CHECK_EQ(pp_write(x[1], "ok", 2), 2);
		char c[2];
		CHECK_EQ(pp_read(x[0], c, 2), 2);
		/* Its export, imported under the same limits. */
		int fd = pp_export(x[0]);
		CHECK(fd >= 0);
		int have = tp_count_fds();
		for (int more = 0; more < 12; more++) {
			struct rlimit l2 = { (rlim_t)(have + more), old.rlim_max };
			CHECK_EQ(setrlimit(RLIMIT_NOFILE, &l2), 0);
			struct pp_end *imp = pp_import(fd);
			int e2 = errno;
			CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
			if (!imp) {
				CHECK_EQ(e2, EMFILE);
				CHECK_EQ(tp_count_fds(), have);
				continue;
			}
			CHECK_EQ(pp_close(imp), 0);
		}
		close(fd);
		CHECK_EQ(pp_close(x[0]), 0);
		CHECK_EQ(pp_close(x[1]), 0);
		CHECK_EQ(tp_count_fds(), base);
	}
	CHECK(made > 0);
	/* Every ring free again: seven more fit. */
	struct pp_end *in[7][2];
	for (int i = 0; i < 7; i++)
		CHECK_EQ(pp_pipe_in(in[i], 0, s[0]), 0);
	for (int i = 0; i < 7; i++) {
		CHECK_EQ(pp_close(in[i][0]), 0);
		CHECK_EQ(pp_close(in[i][1]), 0);
	}
	struct pp_shared_stats st = stats_of(s[0]);
	CHECK_EQ(st.pages_in_ring, 0);
	CHECK_EQ(st.pages_held, 0);
	CHECK_EQ(st.holders, 1);
	CHECK_EQ(pp_close(s[0]), 0);
	CHECK_EQ(pp_close(s[1]), 0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	t_around_cases(tp_fds_note, tp_fds_same);
	RUN(errors_and_limits);
	RUN(tee_holds_pages_once);
	RUN(fanout_to_four_processes);
	RUN(import_reaches_the_pipe);
	RUN(fd_limit_at_every_step);
	return T_DONE();
}
