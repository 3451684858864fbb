/*
 * crash_named.c - named pipes (pp_mkfifo, pp_open) whose peer is killed
 * (SIGKILL) at random instants: before its open, inside it, while the
 * survivor waits in its own open, or in the middle of reading or writing.
 * Each case runs on a kernel FIFO (mkfifo(3), open(2)) and on a named
 * pagepipe with the same rules and bounds, so the kernel run shows the
 * expectations are the kernel's.
 *
 * A round: the survivor S and the victim V are forked (in random order,
 * S sometimes first and already waiting in its blocking open); V opens
 * the other side blocking and then writes records (or reads) without end;
 * V is killed after a random delay (often none) from its fork (so the kill
 * lands before or inside V's open) or, in half the rounds, from the return
 * of its open (mid read or write, with the pipe's lock held or not).  Then, as fifo(7) has it:
 *   - if S's open has returned, S must finish within 1 s of the kill: a
 *     reader reads every record whole (crash.h's self-checking records) and
 *     then end of file, a writer gets EPIPE;
 *   - S may still wait in its open only if V's open had not returned; then
 *     the test plays the missing peer with a non-blocking open of the other
 *     side, which must succeed (S waits, so S counts), and closes it at
 *     once: S's open must return and S finish as above within 1 s;
 *   - S never hangs (every wait of the test is bounded; a call that does
 *     not return within 10 s ends with EINTR from an alarm);
 *   - on the pagepipe, S checks at the end, before it closes, that the
 *     dead V is not counted and left nothing: pp_shared_stats shows one
 *     holder (S) and no page held outside the ring (and none in it, for a
 *     reader at end of file);
 *   - once S has closed, nobody holds the pipe: a non-blocking open for
 *     writing fails with ENXIO (a killed reader does not count), and a
 *     non-blocking open for reading finds the pipe empty (end of file at
 *     once: no record of the round is left over) with, on the pagepipe,
 *     one holder and no page in the ring or held.
 * Cases: writer_killed (S reads), reader_killed (S writes), each on both
 * kinds of FIFO, and join_churn (pagepipe only; see its comment); rounds: t_scaled_san(60) on the pagepipe, a third of that
 * on the kernel FIFO.  PP_CRASH_SEED repeats a run's choices.
 */
#include "crash.h"
#include "harness/fifo.h"
#include "harness/helpers.h"

#include <sys/stat.h>

#define ROUNDS 60
#define BOUND_S 1.0

static char dir[64];
static char path[128];

/* ---- a FIFO, kernel or pagepipe (harness/fifo.h), at `path` ------------ */

#define nf tp_fifo
#define nf_read tp_fifo_read
#define nf_write tp_fifo_write
#define nf_close tp_fifo_close

static int nf_open(struct nf *f, int kernel, int wr, int nb)
{
	return tp_fifo_open(f, kernel, path, wr, nb);
}

/* On the pagepipe: only the caller holds the pipe and no page is held
 * outside the ring (and, with empty, none in it). */
static void check_alone(struct nf *f, int empty)
{
	struct pp_shared_stats st;
	if (f->kernel)
		return;
	CR_CHECK(pp_shared_stats(f->e, &st) == 0);
	CR_CHECK(st.holders == 1 && st.pages_held == 0 && (!empty || st.pages_in_ring == 0));
	if (st.holders != 1 || st.pages_held || (empty && st.pages_in_ring))
		fprintf(stderr, "  holders %ld, pages held %ld, in the ring %ld, idle %ld\n",
		        st.holders, st.pages_held, st.pages_in_ring, st.pages_idle);
}

/* ---- the two processes ---------------------------------------------------------- */

enum { S_START, S_IN_OPEN, S_OPENED, S_DONE };

struct share {
	atomic_int s_state;
	atomic_int v_opened;
	double s_end;     /* when S saw end of file or EPIPE */
	long s_result;    /* 0 end of file, or -errno */
	long records;
	int bad;
};
static struct share *sh;

/* The survivor: open side wr (blocking), then read to end of file or
 * write until EPIPE; then the checks, close, exit. */
__attribute__((noreturn)) static void survivor(int kernel, int wr, uint32_t wid)
{
	static struct cr_stream s;
	static unsigned char rec[PP_PIPE_BUF];
	struct nf f;
	signal(SIGPIPE, SIG_IGN);
	cr_alarm_handler();
	alarm(10);
	atomic_store(&sh->s_state, S_IN_OPEN);
	if (nf_open(&f, kernel, wr, 0) != 0) {
		CR_CHECK(!"the survivor's open");
		_exit(1);
	}
	atomic_store(&sh->s_state, S_OPENED);
	ssize_t n;
	if (wr) {
		for (uint32_t seq = 0;; seq++) {
			uint32_t len = cr_len();
			cr_make(rec, wid, seq, len);
			n = nf_write(&f, rec, len);
			if (n != (ssize_t)len)
				break;
		}
		sh->s_end = t_now();
		sh->s_result = n < 0 ? -errno : n;
		check_alone(&f, 0);
	} else {
		memset(&s, 0, sizeof s);
		for (;;) {
			n = nf_read(&f, s.buf + s.have, sizeof s.buf - s.have);
			if (n <= 0)
				break;
			s.have += (size_t)n;
			if (!cr_parse(&s, CR_WRITERS))
				break;
		}
		sh->s_end = t_now();
		sh->s_result = n < 0 ? -errno : n;
		sh->records = s.records;
		sh->bad = s.bad || s.have != 0; /* a torn record at end of file */
		check_alone(&f, 1);
	}
	alarm(0);
	atomic_store(&sh->s_state, S_DONE);
	nf_close(&f);
	_exit(0);
}

/* The victim: open side wr (blocking), then write records or read
 * without end, until killed. */
__attribute__((noreturn)) static void victim(int kernel, int wr, uint32_t wid)
{
	static unsigned char buf[65536];
	struct nf f;
	signal(SIGPIPE, SIG_IGN);
	if (nf_open(&f, kernel, wr, 0) != 0)
		_exit(1);
	atomic_store(&sh->v_opened, 1);
	for (uint32_t seq = 0;; seq++) {
		if (wr) {
			uint32_t len = cr_len();
			cr_make(buf, wid, seq, len);
			if (nf_write(&f, buf, len) != (ssize_t)len)
				break;
		} else if (nf_read(&f, buf, 1 + cr_below(sizeof buf)) <= 0) {
			break;
		}
	}
	pause(); /* the other side went: wait for the kill */
	_exit(0);
}

/* Is process pid asleep in a FIFO's open (waiting for the other side)?
 * By its wchan, wait_for_partner; where the kernel hides wchan ("0"), by
 * its state: asleep at five looks in a row. */
static int in_fifo_open(pid_t pid)
{
	char p[64], buf[128];
	snprintf(p, sizeof p, "/proc/%d/wchan", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	if (n > 1)
		return strcmp(buf, "wait_for_partner") == 0;
	for (int streak = 0; streak < 5; streak++) {
		snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			close(fd);
		buf[n > 0 ? n : 0] = 0;
		char *c = strrchr(buf, ')');
		if (!c || c[1] != ' ' || c[2] != 'S')
			return 0;
		cr_sleep_us(2000);
	}
	return 1;
}

/* ---- a round ---------------------------------------------------------------------- */

struct tally {
	int direct;     /* S finished after the kill by itself */
	int needed_peer; /* S still waited in its open: the test opened for V */
};

static void round_once(int kernel, int victim_writes, int round, struct tally *ty, struct cr_lat *lat)
{
	uint32_t wid = (uint32_t)round % CR_WRITERS;
	int s_wr = !victim_writes;
	memset(sh, 0, sizeof *sh);
	sh->s_result = 1;
	int order = (int)cr_below(3); /* 0: S first, waiting; 1: V first; 2: both */
	pid_t s = -1, v = -1;
	uint64_t salt = cr_rand();
	fflush(NULL);
	if (order != 1) {
		s = fork();
		if (s == 0) {
			cr_reseed(salt + 1);
			survivor(kernel, s_wr, wid);
		}
		if (order == 0)
			while (atomic_load(&sh->s_state) < S_IN_OPEN)
				cr_sleep_us(100);
		if (order == 0)
			cr_sleep_us((long)cr_below(3000));
	}
	v = fork();
	if (v == 0) {
		cr_reseed(salt + 2);
		victim(kernel, !s_wr, wid);
	}
	if (order == 1) {
		cr_sleep_us((long)cr_below(2000));
		s = fork();
		if (s == 0) {
			cr_reseed(salt + 1);
			survivor(kernel, s_wr, wid);
		}
	}
	/* half the kills count from V's open (mid read or write), half from
	 * its fork (often inside its open, or before it) */
	if (cr_below(2)) {
		double by = t_now() + 5;
		while (!atomic_load(&sh->v_opened) && t_now() < by)
			cr_sleep_us(200);
	}
	cr_sleep_us(cr_kill_delay_us(50000));
	kill(v, SIGKILL);
	int st;
	CR_CHECK(cr_reap(v, 5, &st));
	double killed = t_now();
	int v_opened = atomic_load(&sh->v_opened);
	t_progress();

	/* S finishes within BOUND_S, or still waits in its open */
	/* (if V's open had not returned, S may wait in its open: a short look
	 * then, not the whole bound) */
	double look = v_opened ? BOUND_S : 0.05;
	while (atomic_load(&sh->s_state) != S_DONE && t_now() < killed + look)
		cr_sleep_us(500);
	/* S past its open: V's open had returned too (killed before it said
	 * so), and S must finish within the bound */
	while (atomic_load(&sh->s_state) == S_OPENED && t_now() < killed + BOUND_S)
		cr_sleep_us(500);
	int state = atomic_load(&sh->s_state);
	double from = killed;
	if (state != S_DONE) {
		/* give a survivor that was still being forked the time to get
		 * into its open, then look again */
		CR_CHECK(state == S_IN_OPEN || state == S_START);
		if (state != S_IN_OPEN && state != S_START)
			fprintf(stderr, "  %s round %d: the survivor is stuck after its open (state %d)\n",
			        kernel ? "kernel" : "pagepipe", round, state);
		CR_CHECK(!v_opened); /* V's open returned: S's must have */
		if (v_opened)
			fprintf(stderr, "  %s round %d: the victim had opened, the survivor still "
			        "waits in its open\n", kernel ? "kernel" : "pagepipe", round);
		/* play the missing peer: S waits in its open, so it counts (once
		 * it is in the FIFO's open: a slow start, under the sanitizers,
		 * may not have got there yet) */
		struct nf peer;
		double by = t_now() + 5;
		while (atomic_load(&sh->s_state) != S_DONE && !in_fifo_open(s) && t_now() < by)
			cr_sleep_us(1000);
		int r;
		double until = t_now() + BOUND_S;
		/* (ENXIO while S is still on its way into the FIFO's open) */
		while ((r = nf_open(&peer, kernel, !s_wr, 1)) != 0 && errno == ENXIO &&
		       t_now() < until)
			cr_sleep_us(1000);
		CR_CHECK(r == 0);
		from = t_now();
		if (r == 0)
			nf_close(&peer);
		while (atomic_load(&sh->s_state) != S_DONE && t_now() < from + BOUND_S)
			cr_sleep_us(500);
		CR_CHECK(atomic_load(&sh->s_state) == S_DONE);
		ty->needed_peer++;
	} else {
		ty->direct++;
	}
	CR_CHECK(cr_reap_ok(s, 10));
	if (atomic_load(&sh->s_state) == S_DONE) {
		double l = sh->s_end - from;
		CR_CHECK(l < BOUND_S);
		if (l >= BOUND_S)
			fprintf(stderr, "  %s round %d: the survivor finished %.0f ms after\n",
			        kernel ? "kernel" : "pagepipe", round, l * 1e3);
		cr_lat_add(lat, l > 0 ? l : 0);
		CR_CHECK(sh->s_result == (s_wr ? -EPIPE : 0));
		CR_CHECK(!sh->bad);
	}

	/* Nobody holds the pipe now. */
	struct nf f;
	errno = 0;
	CR_CHECK(nf_open(&f, kernel, 1, 1) == -1 && errno == ENXIO);
	if (f.e || f.fd >= 0)
		nf_close(&f);
	CR_CHECK(nf_open(&f, kernel, 0, 1) == 0);
	if (f.e || f.fd >= 0) {
		char c;
		CR_CHECK(nf_read(&f, &c, 1) == 0); /* empty, and no writer */
		check_alone(&f, 1);
		nf_close(&f);
	}
}

static void run_case(int victim_writes)
{
	static struct cr_lat *lat;
	if (!lat)
		lat = cr_shared(sizeof *lat);
	cr_seed(victim_writes ? "writer_killed" : "reader_killed");
	for (int kernel = 1; kernel >= 0; kernel--) {
		if (kernel ? mkfifo(path, 0600) : pp_mkfifo(path, 0600)) {
			CHECK(!"mkfifo");
			return;
		}
		long rounds = kernel ? t_scaled_san(ROUNDS / 3) : t_scaled_san(ROUNDS);
		struct tally ty = { 0, 0 };
		atomic_store(&lat->n, 0);
		for (long i = 0; i < rounds; i++)
			round_once(kernel, victim_writes, (int)i, &ty, lat);
		char what[160];
		snprintf(what, sizeof what, "%s: %s after the kill (or after the test's open)",
		         kernel ? "kernel FIFO" : "named pagepipe",
		         victim_writes ? "end of file" : "EPIPE");
		cr_lat_report(lat, what);
		fprintf(stderr, "  %s: %ld rounds: %d finished after the kill, %d waited in their "
		        "open until the test opened the other side\n",
		        kernel ? "kernel FIFO" : "named pagepipe", rounds, ty.direct, ty.needed_peer);
		tp_fifo_rm(kernel, path);
	}
	CHECK_EQ(atomic_load(cr_fails), 0);
	atomic_store(cr_fails, 0);
}

static void writer_killed(void)
{
	run_case(1);
}

static void reader_killed(void)
{
	run_case(0);
}

/* ---- joiners killed while others reap --------------------------------------- */

/*
 * Holder records under churn: a reader R and a writer W hold the pipe and
 * stream records; churners open ends of both sides (non-blocking) and
 * close them in a loop, and are killed at random instants and replaced,
 * so dead records are reaped (every open reaps) while others are being
 * taken.  A record must never be freed under its live owner nor shared by
 * two processes: either would leave the counts wrong, and then W gets
 * EPIPE while R lives, R end of file while W lives, or no end of file or
 * one holder too many after everyone else has gone.  At the end: W
 * checks it and R are the only holders, closes; R reads every record and
 * end of file within the bound, and is then alone; no open end is left.
 */
struct churn_share {
	atomic_int opened;    /* R and W have opened (the churn starts after:
	                       * a churner's end would let their opens
	                       * return, and its close give R end of file) */
	atomic_int stop;      /* the churn is over: W finishes */
	atomic_int w_done;    /* W closed (at w_closed) */
	double w_closed;
	long written, read;
};

__attribute__((noreturn)) static void churner(void)
{
	for (unsigned i = 0;; i++) {
		int wr = (int)cr_below(2);
		struct pp_end *e = pp_open(path, (wr ? PP_WRONLY : PP_RDONLY) | PP_NONBLOCK);
		if (!e) {
			/* R and W hold the pipe all along: no open may fail */
			CR_CHECK(!"a churner's open");
			_exit(1);
		}
		if (cr_below(4) == 0)
			cr_sleep_us((long)cr_below(300));
		pp_close(e);
	}
}

static void join_churn(void)
{
	struct churn_share *cs = cr_shared(sizeof *cs);
	memset(cs, 0, sizeof *cs);
	cr_seed("join_churn");
	CHECK_EQ(pp_mkfifo(path, 0600), 0);
	uint64_t salt = cr_rand();
	fflush(NULL);
	pid_t r = fork();
	if (r == 0) {
		cr_reseed(salt + 1);
		alarm(30);
		struct pp_end *e = pp_open(path, PP_RDONLY);
		static struct cr_stream st;
		ssize_t n = -1;
		CR_CHECK(e != NULL);
		atomic_fetch_add(&cs->opened, 1);
		while (e && (n = pp_read(e, st.buf + st.have, sizeof st.buf - st.have)) > 0) {
			st.have += (size_t)n;
			if (!cr_parse(&st, CR_WRITERS))
				break;
		}
		double at = t_now();
		CR_CHECK(n == 0 && !st.bad && st.have == 0);
		/* end of file only once W has closed, and within the bound */
		CR_CHECK(atomic_load(&cs->w_done));
		CR_CHECK(at - cs->w_closed < BOUND_S);
		if (n != 0 || !atomic_load(&cs->w_done) || at - cs->w_closed >= BOUND_S)
			fprintf(stderr, "  join_churn: the reader's read returned %zd (%s) %.0f ms "
			        "after the writer closed (closed: %d)\n", n, n < 0 ? strerror(errno) : "",
			        (at - cs->w_closed) * 1e3, atomic_load(&cs->w_done));
		cs->read = st.records;
		if (e) {
			struct tp_fifo f = { .kernel = 0, .fd = -1, .e = e };
			check_alone(&f, 1);
			pp_close(e);
		}
		_exit(0);
	}
	pid_t w = fork();
	if (w == 0) {
		cr_reseed(salt + 2);
		alarm(30);
		signal(SIGPIPE, SIG_IGN);
		static unsigned char rec[PP_PIPE_BUF];
		struct pp_end *e = pp_open(path, PP_WRONLY);
		CR_CHECK(e != NULL);
		atomic_fetch_add(&cs->opened, 1);
		uint32_t seq = 0;
		while (e && !atomic_load(&cs->stop)) {
			uint32_t len = cr_len();
			cr_make(rec, 0, seq, len);
			ssize_t n = pp_write(e, rec, len);
			CR_CHECK(n == (ssize_t)len); /* never EPIPE: R reads all along */
			if (n != (ssize_t)len) {
				fprintf(stderr, "  join_churn: the writer's write: %s\n",
				        n < 0 ? strerror(errno) : "short");
				break;
			}
			seq++;
			if (seq % 64 == 0)
				cr_sleep_us(100);
		}
		cs->written = seq;
		if (e) {
			struct pp_shared_stats st;
			CR_CHECK(pp_shared_stats(e, &st) == 0 && st.holders == 2);
			if (st.holders != 2)
				fprintf(stderr, "  join_churn: %ld holders, want 2 (R and W)\n",
				        st.holders);
			cs->w_closed = t_now();
			atomic_store(&cs->w_done, 1);
			pp_close(e);
		}
		_exit(0);
	}
	double by = t_now() + 10;
	while (atomic_load(&cs->opened) < 2 && t_now() < by)
		cr_sleep_us(200);
	CHECK_EQ(atomic_load(&cs->opened), 2);
	/* churn: 4 churners, one killed and replaced every 0-3 ms */
	enum { CHURNERS = 4 };
	pid_t c[CHURNERS];
	for (int i = 0; i < CHURNERS; i++) {
		uint64_t cs_salt = cr_rand();
		if ((c[i] = fork()) == 0) {
			cr_reseed(cs_salt);
			churner();
		}
	}
	long kills = 0;
	double until = t_now() + 1.5 * t_scale();
	int nokill = getenv("PP_CHURN_NOKILL") != NULL; /* debugging */
	while (t_now() < until) {
		cr_sleep_us((long)cr_below(3000));
		if (nokill)
			continue;
		int i = (int)cr_below(CHURNERS);
		kill(c[i], SIGKILL);
		CR_CHECK(cr_reap(c[i], 5, NULL));
		kills++;
		uint64_t cs_salt = cr_rand();
		if ((c[i] = fork()) == 0) {
			cr_reseed(cs_salt);
			churner();
		}
	}
	for (int i = 0; i < CHURNERS; i++) {
		kill(c[i], SIGKILL);
		CR_CHECK(cr_reap(c[i], 5, NULL));
	}
	atomic_store(&cs->stop, 1);
	CR_CHECK(cr_reap_ok(w, 10));
	CR_CHECK(cr_reap_ok(r, 10));
	CHECK_EQ(cs->read, cs->written);
	fprintf(stderr, "  join_churn: %ld churners killed, %ld records written and read\n", kills,
	        cs->written);
	/* nobody holds the pipe: a writer finds no reader */
	errno = 0;
	struct pp_end *e = pp_open(path, PP_WRONLY | PP_NONBLOCK);
	CHECK(e == NULL && errno == ENXIO);
	if (e)
		pp_close(e);
	tp_fifo_rm(0, path);
	CHECK_EQ(atomic_load(cr_fails), 0);
	atomic_store(cr_fails, 0);
	munmap(cs, sizeof *cs);
}

int main(void)
{
	snprintf(dir, sizeof dir, "/tmp/pp-crash-named-%d", (int)getpid());
	if (mkdir(dir, 0755) != 0) {
		perror(dir);
		return 2;
	}
	snprintf(path, sizeof path, "%s/fifo", dir);
	sh = cr_shared(sizeof *sh);
	signal(SIGPIPE, SIG_IGN);
	t_around_cases(tp_fds_note, tp_fds_same);
	RUN(writer_killed);
	RUN(reader_killed);
	RUN(join_churn);
	rmdir(dir);
	return T_DONE();
}
