/*
 * crash_fanout.c - pipes of one shared memory (pp_pipe_in), whose buffers
 * name the same pages, with a process killed (SIGKILL) at a random instant
 * in every round.
 *
 * A writer process W streams self-checking records (crash.h) into pipe A;
 * a distributor process T tees A to B and then splices the same bytes from
 * A to C, so that B's and C's buffers name A's pages; reader process RB
 * takes B with pp_read, RC takes C with pp_peek / pp_consume, both checking
 * every record.  Each round kills one of T, RB and RC at a random instant
 * (T often while it holds the memory's lock, between taking a reference
 * and publishing the buffer):
 *   - a reader killed: T meets EPIPE on that reader's pipe, closes it and
 *     goes on with the other, which gets every record W wrote (W writes a
 *     fixed number, then closes); W never fails;
 *   - T killed: W gets EPIPE (A has no reader left), RB and RC get end of
 *     file after whole records in order (the last may be cut where T
 *     died), RC no more of them than RB (T tees before it splices).
 * Then, every process gone but the test's, which keeps a fourth pipe X of
 * the memory to look through: no page is in a ring (A, B and C were
 * retired with their last handles, their pages given back), none is held,
 * and the test is the memory's one holder.  No call may hang (bounded
 * waits; a child still alive after them is killed and the round fails).
 */
#include "crash.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

enum { P_W, P_T, P_RB, P_RC, NPROC };

struct share {
	long written;         /* W: records written */
	int w_epipe;          /* W: stopped on EPIPE */
	long got[NPROC];      /* readers: whole records taken */
	int bad[NPROC];       /* readers: a bad record seen */
	int eof[NPROC];       /* readers: reached end of file */
};
static struct share *sh;

#define RECORDS 20000

static void writer(struct pp_end *a)
{
	static unsigned char rec[PP_PIPE_BUF];
	for (uint32_t seq = 0; seq < RECORDS; seq++) {
		uint32_t len = cr_len();
		cr_make(rec, 0, seq, len);
		ssize_t n = pp_write(a, rec, len);
		if (n < 0 && errno == EPIPE) {
			sh->w_epipe = 1;
			break;
		}
		CR_CHECK(n == (ssize_t)len);
		if (n != (ssize_t)len)
			break;
		sh->written = (long)seq + 1;
	}
	pp_close(a);
	_exit(0);
}

/* Take n bytes out of a (pp_read), for a copy no pipe wants any more. */
static bool discard(struct pp_end *a, size_t n)
{
	static unsigned char buf[65536];
	while (n) {
		ssize_t k = pp_read(a, buf, n < sizeof buf ? n : sizeof buf);
		if (k <= 0)
			return false;
		n -= (size_t)k;
	}
	return true;
}

static void distributor(struct pp_end *a, struct pp_end *b, struct pp_end *c)
{
	bool b_live = true, c_live = true;
	while (b_live || c_live) {
		ssize_t n = 1 << 20;
		if (b_live) {
			n = pp_tee(a, b, 1 << 20, 0);
			if (n < 0 && errno == EPIPE) {
				pp_close(b);
				b_live = false;
				continue;
			}
			CR_CHECK(n >= 0);
			if (n <= 0)
				break; /* end of A */
		}
		if (!c_live) {
			if (!discard(a, (size_t)n))
				break;
			continue;
		}
		/* The bytes just teed, to C (or, B gone, what A has). */
		for (size_t left = (size_t)n; left;) {
			ssize_t k = pp_splice(a, c, left, 0);
			if (k < 0 && errno == EPIPE) {
				pp_close(c);
				c_live = false;
				if (b_live)
					CR_CHECK(discard(a, left));
				break;
			}
			CR_CHECK(k >= 0);
			if (k <= 0) {
				b_live = c_live = false; /* end of A */
				break;
			}
			left -= (size_t)k;
			if (!b_live)
				break;
		}
	}
	pp_close(a);
	if (b_live)
		pp_close(b);
	if (c_live)
		pp_close(c);
	_exit(0);
}

static void reader(struct pp_end *r, int who)
{
	static struct cr_stream s;
	for (;;) {
		ssize_t k;
		if (who == P_RC) {
			struct iovec iov[8];
			k = pp_peek(r, iov, 8);
			if (k > 0) {
				size_t n = 0;
				for (ssize_t i = 0; i < k; i++) {
					size_t l = iov[i].iov_len;
					if (l > sizeof s.buf - s.have - n)
						l = sizeof s.buf - s.have - n;
					memcpy(s.buf + s.have + n, iov[i].iov_base, l);
					n += l;
				}
				CR_CHECK(pp_consume(r, n) == (ssize_t)n);
				k = (ssize_t)n;
			}
		} else {
			k = pp_read(r, s.buf + s.have, 1 + cr_below(sizeof s.buf - s.have - 1));
		}
		if (k <= 0) {
			CR_CHECK(k == 0);
			sh->eof[who] = k == 0;
			break;
		}
		s.have += (size_t)k;
		if (!cr_parse(&s, 1)) {
			sh->bad[who] = 1;
			break;
		}
		sh->got[who] = s.records;
	}
	pp_close(r);
	_exit(0);
}

/* The ends: A's at 0 and 1, B's at 2 and 3, C's at 4 and 5, X's at 6 and
 * 7 (read, write). */
static struct pp_end *E[8];

/* Fork a process that closes every end of A, B and C but those in `keep`
 * (a bit per index of E), then runs fn. */
static pid_t spawn(unsigned keep, void (*fn)(void))
{
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 6; i++)
			if (!(keep & (1u << i)))
				pp_close(E[i]);
		fn();
		_exit(0);
	}
	return pid;
}

static void run_w(void) { writer(E[1]); }
static void run_t(void) { distributor(E[0], E[3], E[5]); }
static void run_rb(void) { reader(E[2], P_RB); }
static void run_rc(void) { reader(E[4], P_RC); }

static void one_round(long round)
{
	memset(sh, 0, sizeof *sh);
	struct pp_end **a = &E[0], **b = &E[2], **c = &E[4], **x = &E[6];
	CHECK(pp_pipe(a, PP_SHARED) == 0);
	CHECK(pp_pipe_in(b, 0, a[1]) == 0);
	CHECK(pp_pipe_in(c, 0, a[1]) == 0);
	CHECK(pp_pipe_in(x, 0, a[0]) == 0);
	if (t_case_failed)
		return;
	pid_t pid[NPROC];
	pid[P_W] = spawn(1u << 1, run_w);
	pid[P_T] = spawn(1u << 0 | 1u << 3 | 1u << 5, run_t);
	pid[P_RB] = spawn(1u << 2, run_rb);
	pid[P_RC] = spawn(1u << 4, run_rc);
	for (int i = 0; i < 6; i++)
		CHECK(pp_close(E[i]) == 0);
	int victim = (int)(P_T + cr_below(3));
	cr_sleep_us(cr_kill_delay_us(30000));
	kill(pid[victim], SIGKILL);
	int st;
	for (int i = 0; i < NPROC; i++)
		CHECK(cr_reap(pid[i], 20, &st));
	bool ok = !sh->bad[P_RB] && !sh->bad[P_RC];
	if (victim == P_T) {
		ok &= sh->eof[P_RB] && sh->eof[P_RC] && sh->got[P_RC] <= sh->got[P_RB] + 1;
	} else {
		int other = victim == P_RB ? P_RC : P_RB;
		ok &= !sh->w_epipe && sh->written == RECORDS && sh->eof[other] &&
		      sh->got[other] == RECORDS;
	}
	struct pp_shared_stats ss;
	CHECK(pp_shared_stats(x[0], &ss) == 0);
	ok &= ss.pages_in_ring == 0 && ss.pages_held == 0 && ss.holders == 1;
	if (!ok)
		fprintf(stderr, "  round %ld, killed %s: W wrote %ld%s; RB %ld%s%s, RC %ld%s%s; "
		        "pages in rings %ld, held %ld, holders %ld\n", round,
		        victim == P_T ? "T" : victim == P_RB ? "RB" : "RC", sh->written,
		        sh->w_epipe ? " (EPIPE)" : "", sh->got[P_RB], sh->eof[P_RB] ? " eof" : "",
		        sh->bad[P_RB] ? " BAD" : "", sh->got[P_RC], sh->eof[P_RC] ? " eof" : "",
		        sh->bad[P_RC] ? " BAD" : "", ss.pages_in_ring, ss.pages_held, ss.holders);
	CHECK(ok);
	CHECK(pp_close(x[0]) == 0);
	CHECK(pp_close(x[1]) == 0);
}

static void one_killed_each_round(void)
{
	cr_seed("one_killed_each_round");
	long rounds = t_scaled_san(40);
	if (t_valgrind())
		rounds = rounds / 4 + 1;
	for (long round = 0; round < rounds && !t_case_failed; round++) {
		cr_reseed((uint64_t)round + 1);
		one_round(round);
		t_progress();
	}
	CHECK_EQ(atomic_load(cr_fails), 0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	sh = cr_shared(sizeof *sh);
	RUN(one_killed_each_round);
	return T_DONE();
}
