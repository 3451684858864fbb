/*
 * shared_coalesce_packet.c - write coalescing and packet mode between
 * processes: what a writer process puts in a PP_SHARED pagepipe is what
 * the reader process gets from a kernel pipe in the same places.
 *
 * Rules checked, the writer a child process, the reader the parent, each
 * scenario on a kernel pipe (pipe2, O_DIRECT for packets) and on a shared
 * pagepipe, the results compared step by step:
 *   - stream mode: small writes merge into the last buffer (one-byte
 *     writes fill exactly 65536 bytes before EAGAIN, the kernel's count),
 *     and pp_shared_stats shows the pages that holds (16 for 65536 bytes;
 *     a write that does not fit the last page's room takes a new one, as
 *     in the kernel), not a page per write; a read takes across write
 *     boundaries; pp_nread agrees with FIONREAD;
 *   - packet mode (PP_PACKET as O_DIRECT): each write is a packet, writes
 *     above PP_PIPE_BUF are split into 4096-byte packets, a zero-length
 *     write makes none, a writev is one packet; a read returns at most one
 *     packet and drops the rest of it; one-byte packets fill 16 slots;
 *     nread counts bytes, not packets.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"
#include "harness/pipe.h"
#include "harness/procs.h"

#define SEED 5u
#define FILL1 1000000000L   /* write op: one byte at a time until EAGAIN */
#define END 0x7fffffffL

/* A scenario: the writer's ops (n: write n bytes; -n: writev of n bytes in
 * three segments; FILL1), then the reader's (n: read n; -n: readv of n in
 * two segments), in packet mode or not, and the pages the shared pipe
 * should hold once the writer is done (-1: not checked). */
struct scen {
	const char *name;
	int flags;
	long w[24];
	long r[24];
	long pages;
};

static const struct scen *cur;
static unsigned char buf[1 << 18];

struct job {
	struct tp t;
	struct t_sync s;
};

static void report(struct t_sync *s, long v)
{
	if (t_send_all(s->fd[1], &v, sizeof v) != 0)
		t_case_failed = 1;
}

static long take(struct t_sync *s)
{
	long v = -99999;
	if (t_recv_all(s->fd[0], &v, sizeof v) != 0) {
		fprintf(stderr, "no report from the writer\n");
		t_case_failed = 1;
	}
	return v;
}

static void writer(void *arg)
{
	struct job *j = arg;
	struct t_sync *s = &j->s;
	t_sync_keep(s, 1);
	tp_close_end(&j->t, 0);
	tp_setnonblock(&j->t, 1, 1);
	size_t pos = 0;
	for (int i = 0; cur->w[i] != END; i++) {
		long op = cur->w[i];
		if (op == FILL1) {
			long n = 0;
			ssize_t r;
			for (;;) {
				tp_fill(buf, 1, SEED, pos);
				r = tp_write(&j->t, buf, 1);
				if (r != 1)
					break;
				n++;
				pos++;
			}
			report(s, n);
			report(s, tp_res(r));
			continue;
		}
		size_t n = (size_t)(op < 0 ? -op : op);
		tp_fill(buf, n, SEED, pos);
		ssize_t r;
		if (op < 0) {
			struct iovec iov[3] = { { buf, n / 3 }, { buf + n / 3, n / 3 },
			                        { buf + 2 * (n / 3), n - 2 * (n / 3) } };
			r = tp_writev(&j->t, iov, 3);
		} else {
			r = tp_write(&j->t, buf, n);
		}
		report(s, tp_res(r));
		if (r > 0)
			pos += (size_t)r;
	}
	report(s, tp_nread(&j->t, 1));
	t_post(s, 1, 1);
	if (t_wait(s, 1) < 0)
		return;
	tp_close_end(&j->t, 1);
	t_post(s, 1, 2);
}

static uint32_t hash(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void scenario(struct tp_rec *r, int kernel)
{
	struct job j;
	memset(&j, 0, sizeof j);
	if (tp_open_kind(&j.t, kernel ? TP_KERNEL : TP_SHARED, cur->flags) != 0 ||
	    t_sync_open(&j.s) != 0) {
		CHECK(!"open");
		return;
	}
	pid_t pid = t_child(writer, &j);
	t_sync_keep(&j.s, 0);
	tp_close_end(&j.t, 1);
	for (int i = 0; cur->w[i] != END; i++) {
		TP_REC(r, "write", take(&j.s));
		if (cur->w[i] == FILL1)
			TP_REC(r, "write after the fill", take(&j.s));
	}
	TP_REC(r, "nread (writer)", take(&j.s));
	CHECK_EQ(t_wait(&j.s, 0), 1);
	TP_REC(r, "nread (reader)", tp_nread(&j.t, 0));
	if (!kernel && cur->pages >= 0) {
		struct pp_shared_stats st;
		CHECK_EQ(pp_shared_stats(j.t.e[0], &st), 0);
		if (st.pages_in_ring != cur->pages) {
			fprintf(stderr, "%s: %ld pages in the ring, want %ld\n", cur->name,
			        st.pages_in_ring, cur->pages);
			t_case_failed = 1;
		}
		CHECK_EQ(st.pages_held, 0);
	}
	tp_setnonblock(&j.t, 0, 1);
	for (int i = 0; cur->r[i] != END; i++) {
		long op = cur->r[i];
		size_t n = (size_t)(op < 0 ? -op : op);
		ssize_t k;
		memset(buf, 0, n);
		if (op < 0) {
			struct iovec iov[2] = { { buf, n / 2 }, { buf + n / 2, n - n / 2 } };
			k = tp_readv(&j.t, iov, 2);
		} else {
			k = tp_read(&j.t, buf, n);
		}
		TP_REC(r, "read", tp_res(k));
		TP_REC(r, "data", k > 0 ? hash(buf, (size_t)k) : 0);
		TP_REC(r, "nread", tp_nread(&j.t, 0));
	}
	t_post(&j.s, 0, 1);
	CHECK_EQ(t_wait(&j.s, 0), 2);
	ssize_t k;
	long rest = 0;
	while ((k = tp_read(&j.t, buf, sizeof buf)) > 0)
		rest += k;
	TP_REC(r, "left after the reads", rest);
	TP_REC(r, "then", tp_res(k));
	if (!kernel) {
		struct pp_shared_stats st;
		CHECK_EQ(pp_shared_stats(j.t.e[0], &st), 0);
		CHECK_EQ(st.pages_in_ring, 0);
	}
	t_sync_close(&j.s);
	tp_close(&j.t);
	t_reap(pid);
}

static void run_scen(const struct scen *s)
{
	cur = s;
	fprintf(stderr, "  scenario %s\n", s->name);
	TP_BOTH_ALL(scenario);
}

static void one_byte_writes_coalesce(void)
{
	static const struct scen s[] = {
		{ "one-byte writes to full", 0, { FILL1, END }, { 100000, 1, END }, 16 },
		{ "one-byte writes, 5000 of them", 0,
		  { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4990, 1, 1, END },
		  { 3, 4094, 50000, END }, 3 },
		{ "small writes, read across them", 0, { 10, 20, 30, -40, 7, END },
		  { 5, 100, 1, 0, END }, 1 },
		{ "merge up to the page end", 0, { 4000, 96, 1, 4095, 1, 4096, END },
		  { 4095, 2, -8192, 3, END }, 4 },
		{ "fill after a partial page", 0, { 100, FILL1, END }, { 65536, 10, END }, 16 },
	};
	for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
		run_scen(&s[i]);
}

static void packets_across_processes(void)
{
	static const struct scen s[] = {
		{ "packets and short reads", PP_PACKET,
		  { 1, 100, 4096, 5000, 0, 10000, 3, -300, END },
		  { 50, 50, 4096, 4096, 100, 4096, 4096, 4096, 10, -300, 1, END }, 10 },
		{ "one-byte packets to full", PP_PACKET, { FILL1, END }, { 10, 10, 0, END }, 16 },
		{ "big reads take one packet", PP_PACKET, { 10, 20, 30, 70000, END },
		  { 100000, 100000, 100000, -100000, 100000, END }, -1 },
	};
	for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
		run_scen(&s[i]);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(one_byte_writes_coalesce);
	RUN(packets_across_processes);
	return T_DONE();
}
