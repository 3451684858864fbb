/*
 * crash_readers.c - readers of a PP_SHARED pipe killed (SIGKILL) at random
 * instants: the writer gets EPIPE (and SIGPIPE, unless PP_NOSIGPIPE) within
 * a second of the last reader's death; pages a dead reader held come back;
 * a surviving reader keeps getting the data, losing none but what the dead
 * one had taken.
 *
 * The rule (pagepipe.h, pp_pipe and pp_write; docs/design.md section 13,
 * "Holders and liveness"): a killed process has closed its handles; a
 * writer whose readers are all gone gets EPIPE, as on a kernel pipe, even
 * if it never has to wait (the design says within about 100 ms); what the
 * dead held is given back.
 *
 *   readers_killed_epipe  rounds in LANES lane processes: a lane makes a
 *                      pipe (every other round with PP_NOSIGPIPE), forks
 *                      one reader (pp_peek + pp_consume of random parts,
 *                      and pp_read of up to 64 KiB, so a kill finds pages
 *                      held by a copy in progress or segments peeked) or
 *                      two (pp_read only: peeking is for one reader at a
 *                      time), and writes records until pp_write fails; a
 *                      killer kills the readers after random delays.  The
 *                      write must fail with EPIPE, with SIGPIPE raised
 *                      once in the rounds without PP_NOSIGPIPE and never
 *                      in the others, within 1 s of the last kill (median
 *                      and max printed); pp_events then says POLLERR; and
 *                      pp_shared_stats shows no page held and one holder.
 *                      t_scaled_san(120) rounds, or PP_SOAK_SECONDS of them.
 *   survivor_keeps_data  two readers take fixed 256-byte records (reads of
 *                      whole multiples, so each read is whole records) and
 *                      mark each record's number in shared memory after
 *                      the read returns; one is killed at a random instant;
 *                      the writer writes on, closes; the survivor reads to
 *                      end of file.  No record is seen twice, every record
 *                      the dead reader did not take reaches the survivor:
 *                      what is missing is at most one read's worth (the
 *                      dead reader's last read, not yet marked), in one
 *                      run; the survivor got records written after the
 *                      kill.  Then, within a bounded wait, pp_shared_stats
 *                      shows no page held and the writer the one holder.
 *   dead_reader_pages_back  a reader (pp_read copies, pp_peek) killed
 *                      while the writer, which also still holds the read
 *                      end, streams records: no side closes, yet within a
 *                      bounded wait pp_shared_stats shows one holder and
 *                      no page held (it reaps the dead itself).
 *   blocked_writer_no_cpu  a writer blocked on a full pipe whose reader
 *                      lives on, idle, for a second spends (almost) no
 *                      CPU, and gets EPIPE within 1 s of that reader's
 *                      kill.
 */
#include "crash.h"

#include <poll.h>

#define LANES 3
#define REC 256
#define SURVIVOR_RECORDS 6000

struct share {
	double last_kill[LANES];
	struct cr_lat epipe;
	atomic_long rounds, kills;
	/* survivor_keeps_data: per record, the readers that took it. */
	atomic_uchar taken_by[SURVIVOR_RECORDS];
	atomic_int takes[SURVIVOR_RECORDS];
	double idle_kill;
};

static struct share *sh;
static atomic_int sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	atomic_fetch_add(&sigpipes, 1);
}

/* A reader: takes data until killed.  peek: also by pp_peek + pp_consume. */
__attribute__((noreturn)) static void reader(struct pp_end *r, bool peek)
{
	static unsigned char buf[65536];
	double until = t_now() + 60;
	while (t_now() < until) {
		if (peek && cr_below(2)) {
			struct iovec iov[16];
			ssize_t n = pp_peek(r, iov, 16);
			if (n <= 0)
				_exit(n == 0 ? 0 : 3);
			size_t bytes = 0;
			for (ssize_t i = 0; i < n; i++)
				bytes += iov[i].iov_len;
			if (cr_below(4) == 0)
				cr_sleep_us((long)cr_below(500)); /* holding the segments */
			size_t take = (size_t)cr_below(bytes) + 1;
			if (pp_consume(r, take) != (ssize_t)take)
				_exit(4);
		} else {
			ssize_t n = pp_read(r, buf, (size_t)cr_below(sizeof buf) + 1);
			if (n <= 0)
				_exit(n == 0 ? 0 : 5);
		}
	}
	_exit(6);
}

static void one_round(int lane, long round)
{
	int flags = PP_SHARED | (round & 1 ? PP_NOSIGPIPE : 0);
	int nreaders = 1 + (int)((round >> 1) & 1);
	struct pp_end *e[2];
	if (pp_pipe(e, flags) != 0) {
		CR_CHECK(!"pp_pipe");
		return;
	}
	struct pp_shared_stats st0, st;
	CR_CHECK(pp_shared_stats(e[1], &st0) == 0);
	sh->last_kill[lane] = 0;
	pid_t pid[2];
	for (int i = 0; i < nreaders; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			cr_reseed((uint64_t)round * 7 + (uint64_t)i + 1);
			pp_close(e[1]);
			reader(e[0], nreaders == 1);
		}
		CR_CHECK(pid[i] > 0);
	}
	CR_CHECK(pp_close(e[0]) == 0);
	pid_t killer = fork();
	if (killer == 0) {
		cr_reseed((uint64_t)round * 7 + 5);
		pp_close(e[1]);
		for (int i = 0; i < nreaders; i++) {
			cr_sleep_us(cr_kill_delay_us(20000));
			sh->last_kill[lane] = t_now();
			kill(pid[i], SIGKILL);
		}
		_exit(0);
	}
	CR_CHECK(killer > 0);

	static unsigned char rec[PP_PIPE_BUF];
	atomic_store(&sigpipes, 0);
	alarm(10);
	ssize_t n = 0;
	for (uint32_t seq = 0;; seq++) {
		uint32_t len = cr_len();
		cr_make(rec, 0, seq, len);
		n = pp_write(e[1], rec, len);
		if (n != (ssize_t)len)
			break;
	}
	int err = errno;
	double failed = t_now();
	alarm(0);
	CR_CHECK(n == -1 && err == EPIPE);
	CR_CHECK(atomic_load(&sigpipes) == (flags & PP_NOSIGPIPE ? 0 : 1));
	CR_CHECK(pp_events(e[1]) & POLLERR);
	CR_CHECK(cr_reap_ok(killer, 10));
	for (int i = 0; i < nreaders; i++) {
		int status = 0;
		CR_CHECK(cr_reap(pid[i], 10, &status));
		CR_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	}
	if (n == -1 && err == EPIPE) {
		double lat = failed - sh->last_kill[lane];
		CR_CHECK(sh->last_kill[lane] > 0 && lat >= 0 && lat < 1.0);
		cr_lat_add(&sh->epipe, lat);
	}
	CR_CHECK(pp_shared_stats(e[1], &st) == 0);
	CR_CHECK(st.holders == st0.holders && st.pages_held == 0);
	if (st.holders != st0.holders || st.pages_held)
		fprintf(stderr, "  stats after: holders %ld (before %ld), held %ld, in ring %ld\n",
		        st.holders, st0.holders, st.pages_held, st.pages_in_ring);
	CR_CHECK(pp_close(e[1]) == 0);
	atomic_fetch_add(&sh->rounds, 1);
	atomic_fetch_add(&sh->kills, nreaders);
	t_progress();
}

static void readers_killed_epipe(void)
{
	cr_seed("readers_killed_epipe");
	long rounds = t_scaled_san(120);
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
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = on_sigpipe;
			sigaction(SIGPIPE, &sa, NULL);
			for (long r = 0; r < rounds || t_now() - t0 < soak; r++)
				one_round(l, r * LANES + l);
			_exit(0);
		}
		CHECK(lane[l] > 0);
	}
	for (int l = 0; l < LANES; l++)
		CHECK(cr_reap_ok(lane[l], 60 + soak * 2));
	fprintf(stderr, "  %ld rounds, %ld readers killed\n", atomic_load(&sh->rounds),
	        atomic_load(&sh->kills));
	double max = cr_lat_report(&sh->epipe, "EPIPE after the last reader's kill");
	CHECK(max < 1.0);
	CHECK(atomic_load(&sh->rounds) >= rounds * LANES);
	CHECK_EQ(atomic_load(cr_fails), 0);
}

/* survivor_keeps_data's readers: whole records, each checked and marked. */
__attribute__((noreturn)) static void record_reader(struct pp_end *r, int id)
{
	static unsigned char buf[16 * REC];
	double until = t_now() + 60;
	while (t_now() < until) {
		size_t want = ((size_t)cr_below(16) + 1) * REC;
		ssize_t n = pp_read(r, buf, want);
		if (n == 0)
			_exit(0);
		if (n < 0 || n % REC) {
			fprintf(stderr, "reader %d: pp_read = %zd (errno %d)\n", id, n, errno);
			_exit(3);
		}
		for (ssize_t at = 0; at < n; at += REC) {
			struct cr_rec h;
			memcpy(&h, buf + at, sizeof h);
			bool ok = h.magic == CR_MAGIC && h.len == REC && h.seq < SURVIVOR_RECORDS &&
			          h.sum == cr_sum(0, REC, h.seq);
			for (uint32_t i = sizeof h; ok && i < REC; i++)
				ok = buf[at + i] == cr_byte(0, h.seq, i);
			if (!ok) {
				fprintf(stderr, "reader %d: bad record (seq %u)\n", id, h.seq);
				_exit(4);
			}
			atomic_fetch_or(&sh->taken_by[h.seq], (unsigned char)(1u << id));
			atomic_fetch_add(&sh->takes[h.seq], 1);
		}
	}
	_exit(6);
}

static void survivor_keeps_data(void)
{
	cr_seed("survivor_keeps_data");
	long rounds = t_scaled_san(20);
	if (t_valgrind())
		rounds = rounds / 4 + 1;
	for (long round = 0; round < rounds; round++) {
		memset(sh->taken_by, 0, sizeof sh->taken_by);
		memset(sh->takes, 0, sizeof sh->takes);
		struct pp_end *e[2];
		CHECK(pp_pipe(e, PP_SHARED) == 0);
		pid_t pid[2];
		for (int i = 0; i < 2; i++) {
			pid[i] = fork();
			if (pid[i] == 0) {
				cr_reseed((uint64_t)round * 3 + (uint64_t)i + 1);
				pp_close(e[1]);
				record_reader(e[0], i);
			}
		}
		CHECK(pp_close(e[0]) == 0);
		long kill_after = (long)cr_below(SURVIVOR_RECORDS / 2);
		unsigned char rec[REC];
		cr_alarm_handler();
		alarm(10);
		for (uint32_t seq = 0; seq < SURVIVOR_RECORDS; seq++) {
			if (seq == kill_after)
				kill(pid[0], SIGKILL);
			cr_make(rec, 0, seq, REC);
			ssize_t n = pp_write(e[1], rec, REC);
			CHECK_EQ(n, REC);
			if (n != REC)
				break;
		}
		alarm(0);
		CHECK(pp_close(e[1]) == 0);
		int status = 0;
		CHECK(cr_reap(pid[0], 10, &status));
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		CHECK(cr_reap_ok(pid[1], 10));
		/* Every record once at most; the missing ones one run of at most
		 * one read (16 records); the survivor got records after the kill. */
		long missing = 0, first_missing = -1, last_missing = -1, twice = 0, late = 0;
		for (long s = 0; s < SURVIVOR_RECORDS; s++) {
			int t = atomic_load(&sh->takes[s]);
			twice += t > 1;
			if (!t) {
				missing++;
				if (first_missing < 0)
					first_missing = s;
				last_missing = s;
			}
			if (s > kill_after && (atomic_load(&sh->taken_by[s]) & 2))
				late++;
		}
		if (missing > 16 || twice || (missing && last_missing - first_missing + 1 != missing))
			fprintf(stderr, "  round %ld: %ld missing (%ld..%ld), %ld twice\n", round, missing,
			        first_missing, last_missing, twice);
		CHECK_EQ(twice, 0);
		CHECK(missing <= 16);
		CHECK(!missing || last_missing - first_missing + 1 == missing);
		CHECK(late > 0);
		t_progress();
	}
	CHECK_EQ(atomic_load(cr_fails), 0);
}

/* A survivor's view of a dead reader's pages: one reader killed while the
 * other lives on; the pages it held come back without any side closing. */
static void dead_reader_pages_back(void)
{
	cr_seed("dead_reader_pages_back");
	long rounds = t_scaled(10);
	if (t_valgrind())
		rounds = rounds / 4 + 1;
	double worst = 0;
	for (long round = 0; round < rounds; round++) {
		struct pp_end *e[2];
		CHECK(pp_pipe(e, PP_SHARED) == 0);
		struct pp_shared_stats st0, st;
		CHECK(pp_shared_stats(e[1], &st0) == 0);
		pid_t pid = fork();
		if (pid == 0) {
			cr_reseed((uint64_t)round + 1);
			pp_close(e[1]);
			reader(e[0], true);
		}
		/* Keep it busy with data, then kill it at a random instant. */
		static unsigned char rec[PP_PIPE_BUF];
		double until = t_now() + cr_below(20000) / 1e6;
		cr_alarm_handler();
		alarm(10);
		for (uint32_t seq = 0; t_now() < until; seq++) {
			uint32_t len = cr_len();
			cr_make(rec, 0, seq, len);
			CHECK_EQ(pp_write(e[1], rec, len), len);
		}
		alarm(0);
		kill(pid, SIGKILL);
		double killed = t_now();
		CHECK(cr_reap(pid, 10, NULL));
		/* We still hold the read end here: no side is gone, so the dead
		 * reader is found by the periodic reap.  Bounded wait. */
		for (;;) {
			CHECK(pp_shared_stats(e[1], &st) == 0);
			if ((st.holders == st0.holders && st.pages_held == 0) || t_now() - killed > 3)
				break;
			cr_sleep_us(5000);
		}
		double took = t_now() - killed;
		if (took > worst)
			worst = took;
		if (st.holders != st0.holders || st.pages_held)
			fprintf(stderr, "  round %ld: after %.2f s: holders %ld (before %ld), held %ld\n",
			        round, took, st.holders, st0.holders, st.pages_held);
		CHECK(st.holders == st0.holders && st.pages_held == 0);
		CHECK(pp_close(e[0]) == 0);
		CHECK(pp_close(e[1]) == 0);
		t_progress();
	}
	fprintf(stderr, "  a dead reader's pages back within %.0f ms (worst)\n", worst * 1e3);
}

static void blocked_writer_no_cpu(void)
{
	cr_seed("blocked_writer_no_cpu");
	struct pp_end *e[2];
	CHECK(pp_pipe(e, PP_SHARED | PP_NOSIGPIPE) == 0);
	pid_t r = fork();
	if (r == 0) {
		pp_close(e[1]);
		t_sleep_ms(20000); /* idle, holding the read end, until killed */
		_exit(5);
	}
	CHECK(pp_close(e[0]) == 0);
	static unsigned char fill[65536];
	CHECK(pp_setfl(e[1], PP_NONBLOCK) == 0);
	while (pp_write(e[1], fill, sizeof fill) > 0)
		;
	CHECK(errno == EAGAIN);
	CHECK(pp_setfl(e[1], 0) == 0);
	pid_t k = fork();
	if (k == 0) {
		pp_close(e[1]);
		/* The writer's idle second, measured; plus a part of its 50 ms
		 * wait, so that the kill does not fall where the wait ends. */
		t_sleep_ms(1000 + (long)cr_below(50));
		sh->idle_kill = t_now();
		kill(r, SIGKILL);
		_exit(0);
	}
	cr_alarm_handler();
	alarm(10);
	double cpu0 = cr_cpu_thread();
	errno = 0;
	ssize_t n = pp_write(e[1], fill, 1);
	int err = errno;
	double failed = t_now();
	double cpu = cr_cpu_thread() - cpu0;
	alarm(0);
	CHECK(n == -1 && err == EPIPE);
	CHECK(cr_reap_ok(k, 10));
	CHECK(cr_reap(r, 10, NULL));
	double lat = failed - sh->idle_kill;
	fprintf(stderr, "  blocked writer: %.2f ms CPU over the idle second; EPIPE %.1f ms"
	        " after the reader's kill\n", cpu * 1e3, lat * 1e3);
	CHECK(cpu < (t_valgrind() || T_SANITIZED ? 0.2 : 0.05));
	CHECK(lat >= 0 && lat < 1.0);
	struct pp_shared_stats st;
	CHECK(pp_shared_stats(e[1], &st) == 0);
	CHECK(st.holders == 1 && st.pages_held == 0);
	CHECK(pp_close(e[1]) == 0);
}

int main(void)
{
	sh = cr_shared(sizeof *sh);
	RUN(readers_killed_epipe);
	RUN(survivor_keeps_data);
	RUN(dead_reader_pages_back);
	RUN(blocked_writer_no_cpu);
	return T_DONE();
}
