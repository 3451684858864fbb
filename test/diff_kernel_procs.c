/*
 * diff_kernel_procs.c - differential test between processes: random
 * operations run by several processes on one kernel pipe, and the same
 * operations run by as many processes on one PP_SHARED pagepipe, give the
 * same results step by step.
 *
 * A driver (the test process) makes a kernel pipe and forks 2 or 3
 * children holding its ends, then a shared pagepipe (in stream or packet
 * mode, like the kernel pipe) and as many children holding its ends; the
 * driver itself holds no end.  Each child takes operations over a control
 * socket pair, runs them on its ends and sends back the return value, the
 * errno and the bytes read.  Every operation goes first to a kernel child,
 * then to the same-numbered pagepipe child, and the two replies must be
 * equal.  The operations: write n (the bytes a function of the seed and
 * the stream position), read n, on either end (the wrong one is EBADF),
 * toggling O_NONBLOCK / PP_NONBLOCK (one flag per end, shared by every
 * process holding it, as a descriptor's file status flags are after
 * fork), FIONREAD / pp_nread, poll(2) revents / pp_events,
 * F_GETPIPE_SZ / F_SETPIPE_SZ, and closing a child's end (the last read
 * end gone: EPIPE; the last write end gone: end of file).
 *
 * Only deterministic steps are made: one operation is in flight at a
 * time, and a call on a blocking end is tried on the kernel pipe with
 * O_NONBLOCK set for that call: if the kernel would have had to wait
 * (EAGAIN, or a short write) the pagepipe call is made non-blocking too;
 * otherwise it runs blocking and must return at once.
 *
 * Seeded: PP_DIFF_SEED (default 1) is the first seed, sequence i uses
 * seed+i; PP_DIFF_ITERS sequences (default 24 times PP_TEST_SCALE, fewer
 * under the sanitizers).  A mismatch prints the seed, the step, the
 * operation and both replies, and the command that replays that sequence.  PP_DIFF_VERBOSE=1 prints every
 * step.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"
#include "harness/pipe.h"
#include "harness/procs.h"

#define MAXC 3
#define RMAX 100000
#define STEPS 80

enum { O_WRITE, O_READ, O_SETNB, O_NREAD, O_EVENTS, O_GETSIZE, O_SETSIZE, O_CLOSE, O_EXIT };
static const char *const op_name[] = { "write", "read", "nonblock", "nread", "events",
	                                   "getsize", "setsize", "close", "exit" };

struct op {
	int code;
	int end;
	long n;         /* bytes, flag, size */
	long off;       /* write: stream position of the data */
	int force_nb;   /* make this call non-blocking */
	unsigned seed;
};

struct reply {
	long ret;
	int err;
	int pad;
};

static unsigned char *dbuf;

/* ---- the children -------------------------------------------------------- */

static int nb_now(struct tp *t, int end)
{
	if (t->kernel)
		return (fcntl(t->fd[end], F_GETFL) & O_NONBLOCK) != 0;
	return (pp_getfl(t->e[end]) & PP_NONBLOCK) != 0;
}

static void run_op(struct tp *t, const struct op *o, struct reply *r)
{
	int restore = -1;
	if (o->force_nb && (o->code == O_WRITE || o->code == O_READ) && !nb_now(t, o->end)) {
		tp_setnonblock(t, o->end, 1);
		restore = o->end;
	}
	errno = 0;
	switch (o->code) {
	case O_WRITE:
		tp_fill(dbuf, (size_t)o->n, o->seed, (size_t)o->off);
		if (o->end == 1)
			r->ret = tp_write(t, dbuf, (size_t)o->n);
		else /* the wrong end */
			r->ret = t->kernel ? write(t->fd[0], dbuf, (size_t)o->n)
			                   : pp_write(t->e[0], dbuf, (size_t)o->n);
		break;
	case O_READ:
		if (o->end == 0)
			r->ret = tp_read(t, dbuf, (size_t)o->n);
		else
			r->ret = t->kernel ? read(t->fd[1], dbuf, (size_t)o->n)
			                   : pp_read(t->e[1], dbuf, (size_t)o->n);
		break;
	case O_SETNB:
		r->ret = tp_setnonblock(t, o->end, (int)o->n) < 0 ? -1 : 0;
		break;
	case O_NREAD:
		r->ret = tp_nread(t, o->end);
		break;
	case O_EVENTS:
		r->ret = tp_events(t, o->end);
		break;
	case O_GETSIZE:
		r->ret = tp_getsize(t, o->end);
		break;
	case O_SETSIZE:
		r->ret = tp_setsize(t, o->end, (size_t)o->n);
		break;
	case O_CLOSE:
		r->ret = tp_close_end(t, o->end);
		break;
	}
	r->err = r->ret < 0 ? errno : 0;
	if (restore >= 0)
		tp_setnonblock(t, restore, 0);
}

struct child {
	struct tp *t;
	int fd;          /* control socket */
	int others[3 * MAXC];
};

static void child_main(void *arg)
{
	struct child *c = arg;
	for (int i = 0; i < 3 * MAXC; i++)
		if (c->others[i] >= 0)
			close(c->others[i]);
	for (;;) {
		struct op o;
		struct reply r = { 0, 0, 0 };
		if (t_recv_all(c->fd, &o, sizeof o) != 0 || o.code == O_EXIT)
			break;
		run_op(c->t, &o, &r);
		size_t extra = o.code == O_READ && r.ret > 0 ? (size_t)r.ret : 0;
		if (t_send_all(c->fd, &r, sizeof r) != 0 || t_send_all(c->fd, dbuf, extra) != 0)
			break;
	}
	tp_close(c->t);
	close(c->fd);
}

/* ---- the driver ------------------------------------------------------------ */

struct side {
	struct tp t;
	int ctl[MAXC];
	pid_t pid[MAXC];
};

static int start(struct side *s, int kind, int flags, int nc, const int *other)
{
	int sv[MAXC][2];
	if (tp_open_kind(&s->t, kind, flags) != 0)
		return -1;
	for (int i = 0; i < nc; i++)
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[i]) != 0)
			return -1;
	for (int i = 0; i < nc; i++) {
		/* the child keeps its own socket only: not the driver's sides,
		 * not its later siblings' sides, not the other pipe's children's */
		struct child c = { &s->t, sv[i][1], { 0 } };
		int k = 0;
		for (int j = 0; j < 3 * MAXC; j++)
			c.others[j] = -1;
		for (int j = 0; j < nc; j++)
			c.others[k++] = sv[j][0];
		for (int j = i + 1; j < nc; j++)
			c.others[k++] = sv[j][1];
		for (int j = 0; other && j < nc; j++)
			c.others[k++] = other[j];
		s->pid[i] = t_child(child_main, &c);
		close(sv[i][1]);
		s->ctl[i] = sv[i][0];
	}
	tp_close(&s->t);
	return 0;
}

static void stop(struct side *s, int nc, int kill_them)
{
	for (int i = 0; i < nc; i++) {
		if (kill_them) {
			kill(s->pid[i], SIGKILL);
		} else {
			struct op o = { O_EXIT, 0, 0, 0, 0, 0 };
			t_send_all(s->ctl[i], &o, sizeof o);
		}
		close(s->ctl[i]);
	}
	for (int i = 0; i < nc; i++) {
		if (kill_them) {
			int st;
			waitpid(s->pid[i], &st, 0);
		} else {
			t_reap(s->pid[i]);
		}
	}
}

/* Send o to child fd, take its reply (and data into buf).  0, or -1. */
static int ask(int fd, const struct op *o, struct reply *r, unsigned char *buf)
{
	if (t_send_all(fd, o, sizeof *o) != 0 || t_recv_all(fd, r, sizeof *r) != 0)
		return -1;
	if (o->code == O_READ && r->ret > 0 && t_recv_all(fd, buf, (size_t)r->ret) != 0)
		return -1;
	return 0;
}

static long pick_size(uint32_t *rs, int rd)
{
	static const long edges[] = { 0, 1, 2, 100, 4095, 4096, 4097, 8192, 65535, 65536 };
	switch (tp_rand(rs) % 5) {
	case 0:
		return edges[tp_rand(rs) % 10];
	case 1:
		return 1 + tp_rand(rs) % 64;
	case 2:
		return 1 + tp_rand(rs) % 5000;
	case 3:
		return 1 + tp_rand(rs) % (rd ? RMAX : 70000);
	default:
		return 1 + tp_rand(rs) % 20000;
	}
}

static unsigned char *kbuf, *pbuf;

/* One random sequence; 0 if every step matched. */
static int sequence(unsigned seed, int verbose)
{
	uint32_t rs = seed * 2654435761u + 1;
	int nc = 2 + (int)(tp_rand(&rs) % 2);
	int flags = tp_rand(&rs) % 3 == 0 ? PP_PACKET : 0;
	int holds[MAXC][2], nb[2] = { 0, 0 };
	struct side k, p;
	long woff = 0;
	int bad = 0;
	if (start(&k, TP_KERNEL, flags, nc, NULL) != 0 || start(&p, TP_SHARED, flags, nc, k.ctl) != 0) {
		CHECK(!"start");
		return -1;
	}
	for (int i = 0; i < nc; i++)
		holds[i][0] = holds[i][1] = 1;
	for (int step = 0; step < STEPS && !bad; step++) {
		struct op o = { 0, 0, 0, 0, 0, seed };
		int c = (int)(tp_rand(&rs) % (uint32_t)nc);
		uint32_t x = tp_rand(&rs) % 100;
		o.end = (int)(tp_rand(&rs) % 2);
		if (x < 30) {
			o.code = O_WRITE;
			o.end = tp_rand(&rs) % 20 ? 1 : 0;
			o.n = pick_size(&rs, 0);
		} else if (x < 60) {
			o.code = O_READ;
			o.end = tp_rand(&rs) % 20 ? 0 : 1;
			o.n = pick_size(&rs, 1);
		} else if (x < 72) {
			o.code = O_SETNB;
			o.n = tp_rand(&rs) % 2;
		} else if (x < 80) {
			o.code = O_NREAD;
		} else if (x < 88) {
			o.code = O_EVENTS;
		} else if (x < 91) {
			o.code = O_GETSIZE;
		} else if (x < 97) {
			static const long sz[] = { 1, 4096, 8192, 12288, 16384, 65536, 262144 };
			o.code = O_SETSIZE;
			o.n = sz[tp_rand(&rs) % 7];
		} else {
			o.code = O_CLOSE;
		}
		if (!holds[c][o.end]) {
			/* a child whose end is closed: another that holds it, or skip */
			int found = -1;
			for (int i = 0; i < nc; i++)
				if (holds[i][o.end])
					found = i;
			if (found < 0)
				continue;
			c = found;
		}
		if (o.code == O_CLOSE) {
			holds[c][o.end] = 0;
		}
		o.off = woff;
		o.force_nb = !nb[o.end];
		struct reply kr, pr;
		if (ask(k.ctl[c], &o, &kr, kbuf) != 0) {
			fprintf(stderr, "seed %u step %d: the kernel child did not answer\n", seed, step);
			bad = 1;
			break;
		}
		/* did the kernel have to wait?  Then the pagepipe call must not */
		int would_wait = o.force_nb && ((kr.ret < 0 && kr.err == EAGAIN) ||
		                 (o.code == O_WRITE && kr.ret >= 0 && kr.ret < o.n));
		o.force_nb = would_wait;
		if (ask(p.ctl[c], &o, &pr, pbuf) != 0) {
			fprintf(stderr, "seed %u step %d: the pagepipe child did not answer\n", seed,
			        step);
			bad = 1;
			break;
		}
		int same = kr.ret == pr.ret && kr.err == pr.err &&
		           (o.code != O_READ || kr.ret <= 0 || !memcmp(kbuf, pbuf, (size_t)kr.ret));
		if (verbose || !same)
			fprintf(stderr, "%sseed %u step %d child %d: %s end %d n %ld%s (%s): kernel %ld "
			        "errno %d, pagepipe %ld errno %d%s\n", same ? "" : "MISMATCH ", seed, step,
			        c, op_name[o.code], o.end, o.n, o.force_nb ? " non-blocking" : "",
			        flags ? "packet" : "stream", kr.ret, kr.err, pr.ret, pr.err,
			        !same && kr.ret == pr.ret && kr.err == pr.err ? " (data differ)" : "");
		if (!same)
			bad = 1;
		if (o.code == O_WRITE && kr.ret > 0)
			woff += kr.ret;
		if (o.code == O_SETNB && kr.ret == 0)
			nb[o.end] = (int)o.n;
		t_progress();
	}
	stop(&k, nc, bad);
	stop(&p, nc, bad);
	if (bad)
		fprintf(stderr, "replay: PP_DIFF_SEED=%u PP_DIFF_ITERS=1 PP_DIFF_VERBOSE=1 %s\n", seed,
		        "build/test/diff_kernel_procs");
	return bad;
}

static void random_sequences(void)
{
	unsigned seed = (unsigned)t_env_long("PP_DIFF_SEED", 1);
	long iters = t_env_long("PP_DIFF_ITERS", t_scaled_san(24));
	int verbose = (int)t_env_long("PP_DIFF_VERBOSE", 0);
	int fails = 0;
	for (long i = 0; i < iters && fails < 3; i++) {
		if (sequence(seed + (unsigned)i, verbose) != 0) {
			t_case_failed = 1;
			fails++;
		}
	}
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	dbuf = malloc(RMAX + 70000);
	kbuf = malloc(RMAX);
	pbuf = malloc(RMAX);
	if (!dbuf || !kbuf || !pbuf)
		return 2;
	RUN(random_sequences);
	free(dbuf);
	free(kbuf);
	free(pbuf);
	return T_DONE();
}
