/*
 * crash_writers.c - writers of a PP_SHARED pipe killed (SIGKILL) at random
 * instants: the reader sees every record whole, in each writer's order,
 * every record whose pp_write returned, and end of file within a second
 * of the last writer's death; the dead writers' pages come back.
 *
 * The rule (pagepipe.h, pp_pipe; docs/design.md section 13, "The lock"
 * and "Holders and liveness"): a process killed at any instant has closed
 * its handles; a write of at most PP_PIPE_BUF bytes it was making is seen
 * whole or not at all; every byte of a write that returned is delivered;
 * a reader whose writers all died sees end of file (the design says within
 * about 100 ms); the pages and references the dead held are given back.
 *
 *   writers_killed     rounds in LANES lane processes at once (so the
 *                      waits for end of file overlap): a lane makes a
 *                      pipe, forks WRITERS writers that write records of
 *                      16..PP_PIPE_BUF bytes as fast as the lane reads and
 *                      publish, after each pp_write returns, how many
 *                      returned (shared memory); a killer process kills
 *                      them one by one after random delays (0 to 20 ms,
 *                      so kills land in fork, in the join, in a blocked
 *                      write, in a copy, under the lock).  The lane reads
 *                      (blocking pp_read, bounded by an alarm) and checks
 *                      every record: header, payload, sequence; at end of
 *                      file that no partial record is left, that each
 *                      writer's records delivered are the ones whose write
 *                      returned (or one more: the write that returned just
 *                      before the kill, not yet published), and that
 *                      pp_shared_stats is back where it was before the
 *                      writers joined: no page held, none in the ring,
 *                      one holder.  Odd writers make their records in
 *                      place (pp_reserve, build, pp_commit; now and then
 *                      reserving a page more, given back), so kills also
 *                      land between a reserve and its commit.  End-of-file latency (last kill to
 *                      pp_read returning 0) must stay under 1 s; median and
 *                      max are printed.  t_scaled_san(300) kills (a quarter
 *                      of that under valgrind); under PP_SOAK_SECONDS,
 *                      rounds go on for that long.
 *   idle_reader_no_cpu a reader blocked on an empty pipe whose writer
 *                      lives on, idle, for a second: it spends (almost) no
 *                      CPU while it waits (no busy polling), and sees end
 *                      of file within 1 s of that writer's kill.
 */
#include "crash.h"

#define LANES 3
#define WRITERS 3

struct lane_share {
	atomic_long returned[WRITERS];
	double last_kill; /* t_now() of the last kill, written before it */
};

struct share {
	struct lane_share lane[LANES];
	struct cr_lat eof;
	atomic_long rounds, records, kills;
	double idle_cpu, idle_kill, idle_eof;
};

static struct share *sh;
static struct cr_stream stream;

/* One record made in place: reserved (now and then a page more than it
 * needs, which the commit gives back), built in the pipe's page, committed;
 * what pp_commit returned. */
static ssize_t write_in_place(struct pp_end *w, uint32_t id, uint32_t seq, uint32_t len)
{
	struct iovec iov[2];
	size_t want = len + (cr_below(4) == 0 ? PP_PAGE_SIZE : 0);
	ssize_t k = pp_reserve(w, iov, 2, want);
	if (k < 1 || iov[0].iov_len < len) {
		fprintf(stderr, "writer %u: pp_reserve(%zu) = %zd (errno %d)\n", id, want, k, errno);
		_exit(3);
	}
	cr_make(iov[0].iov_base, id, seq, len);
	return pp_commit(w, len);
}

/* A writer: records as fast as the pipe takes them, until killed.  Odd
 * writers make each record in place (pp_reserve, pp_commit), so kills land
 * in a reservation too: its pages and slots must come back, and the
 * record must never be seen. */
__attribute__((noreturn)) static void writer(struct pp_end *w, uint32_t id, atomic_long *returned)
{
	static unsigned char rec[PP_PIPE_BUF];
	double until = t_now() + 60; /* never outlive a broken test for long */
	for (uint32_t seq = 0; t_now() < until; seq++) {
		uint32_t len = cr_len();
		ssize_t n;
		if (id % 2) {
			n = write_in_place(w, id, seq, len);
		} else {
			cr_make(rec, id, seq, len);
			n = pp_write(w, rec, len);
		}
		if (n != (ssize_t)len) {
			fprintf(stderr, "writer %u: %s = %zd (errno %d)\n", id,
			        id % 2 ? "pp_commit" : "pp_write", n, errno);
			_exit(3);
		}
		atomic_store(returned, (long)seq + 1);
	}
	_exit(4);
}

static void one_round(int lane, uint64_t salt)
{
	struct lane_share *ls = &sh->lane[lane];
	struct pp_end *e[2];
	if (pp_pipe(e, PP_SHARED) != 0) {
		CR_CHECK(!"pp_pipe");
		return;
	}
	struct pp_shared_stats st0, st;
	CR_CHECK(pp_shared_stats(e[0], &st0) == 0);
	for (int w = 0; w < WRITERS; w++)
		atomic_store(&ls->returned[w], 0);
	ls->last_kill = 0;

	pid_t pid[WRITERS];
	for (int w = 0; w < WRITERS; w++) {
		pid[w] = fork();
		if (pid[w] == 0) {
			cr_reseed(salt * 31 + (uint64_t)w + 1);
			pp_close(e[0]);
			writer(e[1], (uint32_t)w, &ls->returned[w]);
		}
		CR_CHECK(pid[w] > 0);
	}
	pp_close(e[1]);
	pid_t killer = fork();
	if (killer == 0) {
		cr_reseed(salt * 31 + 17);
		pp_close(e[0]);
		int order[WRITERS];
		for (int w = 0; w < WRITERS; w++)
			order[w] = w;
		for (int w = WRITERS - 1; w > 0; w--) {
			int j = (int)cr_below((uint64_t)w + 1), t = order[w];
			order[w] = order[j];
			order[j] = t;
		}
		for (int i = 0; i < WRITERS; i++) {
			cr_sleep_us(cr_kill_delay_us(20000));
			ls->last_kill = t_now();
			kill(pid[order[i]], SIGKILL);
		}
		_exit(0);
	}
	CR_CHECK(killer > 0);

	memset(&stream, 0, sizeof stream);
	alarm(10); /* a read that hangs ends with EINTR */
	ssize_t n;
	for (;;) {
		n = pp_read(e[0], stream.buf + stream.have, sizeof stream.buf - stream.have);
		if (n <= 0)
			break;
		stream.have += (size_t)n;
		if (!cr_parse(&stream, WRITERS))
			break;
	}
	double eof = t_now();
	alarm(0);
	CR_CHECK(n == 0);
	CR_CHECK(!stream.bad);
	CR_CHECK(cr_reap_ok(killer, 10));
	for (int w = 0; w < WRITERS; w++) {
		int status = 0;
		CR_CHECK(cr_reap(pid[w], 10, &status));
		CR_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	}
	if (n == 0) {
		double lat = eof - ls->last_kill;
		CR_CHECK(ls->last_kill > 0 && lat >= 0 && lat < 1.0);
		cr_lat_add(&sh->eof, lat);
		CR_CHECK(stream.have == 0); /* no partial record at end of file */
		if (stream.have)
			fprintf(stderr, "  %zu bytes of a torn record at end of file\n", stream.have);
	}
	for (int w = 0; w < WRITERS; w++) {
		long ret = atomic_load(&ls->returned[w]), got = stream.next[w];
		if (!(got == ret || got == ret + 1))
			fprintf(stderr, "  writer %d: %ld writes returned, %ld records read\n", w, ret, got);
		CR_CHECK(got == ret || got == ret + 1);
	}
	CR_CHECK(pp_shared_stats(e[0], &st) == 0);
	CR_CHECK(st.holders == st0.holders);
	CR_CHECK(st.pages_held == st0.pages_held && st.pages_in_ring == st0.pages_in_ring);
	CR_CHECK(st.pages_idle <= 16 + 64);
	if (st.holders != st0.holders || st.pages_held || st.pages_in_ring)
		fprintf(stderr, "  stats after: holders %ld (before %ld), held %ld, in ring %ld, idle %ld\n",
		        st.holders, st0.holders, st.pages_held, st.pages_in_ring, st.pages_idle);
	CR_CHECK(pp_close(e[0]) == 0);
	atomic_fetch_add(&sh->rounds, 1);
	atomic_fetch_add(&sh->kills, WRITERS);
	atomic_fetch_add(&sh->records, stream.records);
	t_progress();
}

static void writers_killed(void)
{
	cr_seed("writers_killed");
	long rounds = t_scaled_san(300) / WRITERS; /* 300 kills */
	if (t_valgrind())
		rounds = rounds / 4 + 1;
	rounds = rounds / LANES + 1;
	double soak = cr_soak_seconds(), t0 = t_now();
	pid_t lane[LANES];
	for (int l = 0; l < LANES; l++) {
		lane[l] = fork();
		if (lane[l] == 0) {
			cr_reseed((uint64_t)l + 100);
			cr_alarm_handler();
			for (long r = 0; r < rounds || t_now() - t0 < soak; r++)
				one_round(l, (uint64_t)r * LANES + (uint64_t)l);
			_exit(0);
		}
		CHECK(lane[l] > 0);
	}
	for (int l = 0; l < LANES; l++)
		CHECK(cr_reap_ok(lane[l], 60 + soak * 2));
	fprintf(stderr, "  %ld rounds, %ld writers killed, %ld records checked\n",
	        atomic_load(&sh->rounds), atomic_load(&sh->kills), atomic_load(&sh->records));
	double max = cr_lat_report(&sh->eof, "end of file after the last writer's kill");
	CHECK(max < 1.0);
	CHECK(atomic_load(&sh->rounds) >= rounds * LANES);
	CHECK_EQ(atomic_load(cr_fails), 0);
}

static void idle_reader_no_cpu(void)
{
	cr_seed("idle_reader_no_cpu");
	struct pp_end *e[2];
	CHECK(pp_pipe(e, PP_SHARED) == 0);
	pid_t w = fork();
	if (w == 0) {
		pp_close(e[0]);
		t_sleep_ms(20000); /* idle, holding the write end, until killed */
		_exit(5);
	}
	CHECK(pp_close(e[1]) == 0);
	pid_t k = fork();
	if (k == 0) {
		pp_close(e[0]);
		/* The reader's idle second, measured; plus a part of its 50 ms
		 * wait, so that the kill does not fall where the wait ends. */
		t_sleep_ms(1000 + (long)cr_below(50));
		sh->idle_kill = t_now();
		kill(w, SIGKILL);
		_exit(0);
	}
	cr_alarm_handler();
	alarm(10);
	char buf[64];
	double cpu0 = cr_cpu_thread();
	ssize_t n = pp_read(e[0], buf, sizeof buf);
	double eof = t_now();
	double cpu = cr_cpu_thread() - cpu0;
	alarm(0);
	CHECK_EQ(n, 0);
	CHECK(cr_reap_ok(k, 10));
	CHECK(cr_reap(w, 10, NULL));
	double lat = eof - sh->idle_kill;
	fprintf(stderr, "  blocked reader: %.2f ms CPU over the idle second; end of file %.1f ms"
	        " after the writer's kill\n", cpu * 1e3, lat * 1e3);
	/* A wake every 50 ms costs microseconds; busy polling would cost most
	 * of the second.  Valgrind and the sanitizers make each wake dearer. */
	CHECK(cpu < (t_valgrind() || T_SANITIZED ? 0.2 : 0.05));
	CHECK(lat >= 0 && lat < 1.0);
	CHECK(pp_close(e[0]) == 0);
	CHECK_EQ(atomic_load(cr_fails), 0);
}

int main(void)
{
	sh = cr_shared(sizeof *sh);
	RUN(writers_killed);
	RUN(idle_reader_no_cpu);
	return T_DONE();
}
