/*
 * crash_all_die.c - every process holding a PP_SHARED pipe is killed: the
 * pipe's memory goes with them.
 *
 * The rule (docs/design.md section 13, "What lives where"): an anonymous
 * pipe's memories are memfds, which the kernel frees with the last
 * descriptor and mapping, even if every process died; nothing else (no
 * file, no daemon) keeps them.
 *
 *   all_killed         the test makes a pipe, notes the identity (device,
 *                      inode) of its two memfds, forks a writer (left
 *                      blocked on a full pipe, or writing as the reader
 *                      reads), a reader (pp_read, or pp_peek holding its
 *                      segments), and a third process holding an exported
 *                      descriptor of the read end and a handle it imported
 *                      from it; then closes its own handles.  From then on
 *                      no descriptor or mapping of this process may name
 *                      the memfds, while the others' do.  The three are killed at random instants,
 *                      in random order.  Within a bounded wait, no
 *                      /proc/PID/fd entry and no /proc/PID/maps line of any
 *                      process names either memfd (the memory is freed).
 *                      t_scaled_san(10) rounds.
 */
#include "crash.h"

#include <sys/sysmacros.h>
#include <sys/uio.h>

struct id {
	dev_t dev;
	ino_t ino;
};

/* The pipe's memfds, found among our descriptors. */
static int memfd_ids(struct id ids[2])
{
	int n = 0;
	for (int fd = 0; fd < 1024 && n < 2; fd++) {
		char path[64], link[256];
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		ssize_t len = readlink(path, link, sizeof link - 1);
		if (len <= 0)
			continue;
		link[len] = 0;
		struct stat st;
		if (strncmp(link, "/memfd:pagepipe-", 16) != 0 || fstat(fd, &st) != 0)
			continue;
		bool seen = false;
		for (int i = 0; i < n; i++)
			seen |= ids[i].dev == st.st_dev && ids[i].ino == st.st_ino;
		if (!seen)
			ids[n++] = (struct id){ st.st_dev, st.st_ino };
	}
	return n;
}

/* How many descriptors and mappings of process pid (a /proc entry name)
 * name one of ids. */
static int refs_in(const char *pid, const struct id ids[2])
{
	char path[300], line[512];
	int refs = 0;
	snprintf(path, sizeof path, "/proc/%s/fd", pid);
	DIR *d = opendir(path);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			struct stat st;
			char p[600];
			snprintf(p, sizeof p, "%s/%s", path, de->d_name);
			if (de->d_name[0] == '.' || stat(p, &st) != 0)
				continue;
			for (int i = 0; i < 2; i++)
				refs += st.st_dev == ids[i].dev && st.st_ino == ids[i].ino;
		}
		closedir(d);
	}
	snprintf(path, sizeof path, "/proc/%s/maps", pid);
	FILE *f = fopen(path, "r");
	if (f) {
		while (fgets(line, sizeof line, f)) {
			unsigned maj, min;
			unsigned long ino;
			if (sscanf(line, "%*x-%*x %*s %*x %x:%x %lu", &maj, &min, &ino) != 3)
				continue;
			for (int i = 0; i < 2; i++)
				refs += ino == ids[i].ino && makedev(maj, min) == ids[i].dev;
		}
		fclose(f);
	}
	return refs;
}

static int refs_anywhere(const struct id ids[2])
{
	int refs = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
			refs += refs_in(de->d_name, ids);
	closedir(d);
	return refs;
}

__attribute__((noreturn)) static void hold(void)
{
	t_sleep_ms(20000); /* until killed */
	_exit(5);
}

static void all_killed(void)
{
	cr_seed("all_killed");
	long rounds = t_scaled_san(10);
	if (t_valgrind())
		rounds = rounds / 4 + 1;
	double worst = 0;
	for (long round = 0; round < rounds; round++) {
		struct pp_end *e[2];
		CHECK(pp_pipe(e, PP_SHARED | PP_NOSIGPIPE) == 0);
		struct id ids[2];
		CHECK_EQ(memfd_ids(ids), 2);
		bool busy = cr_below(2); /* the reader reads, or sits on its peek */
		pid_t pid[3];
		pid[0] = fork();
		if (pid[0] == 0) { /* writer */
			cr_reseed((uint64_t)round * 3 + 1);
			pp_close(e[0]);
			static unsigned char rec[PP_PIPE_BUF];
			for (uint32_t seq = 0;; seq++) {
				uint32_t len = cr_len();
				cr_make(rec, 0, seq, len);
				if (pp_write(e[1], rec, len) != (ssize_t)len)
					hold();
			}
		}
		pid[1] = fork();
		if (pid[1] == 0) { /* reader */
			cr_reseed((uint64_t)round * 3 + 2);
			pp_close(e[1]);
			static unsigned char buf[65536];
			struct iovec iov[8];
			if (!busy && pp_peek(e[0], iov, 8) > 0)
				hold(); /* segments held */
			for (;;)
				if (pp_read(e[0], buf, sizeof buf) <= 0)
					hold();
		}
		pid[2] = fork();
		if (pid[2] == 0) { /* an export and an import of it */
			int fd = pp_export(e[0]);
			struct pp_end *in = fd >= 0 ? pp_import(fd) : NULL;
			pp_close(e[0]);
			pp_close(e[1]);
			if (!in)
				_exit(6);
			hold();
		}
		for (int i = 0; i < 3; i++)
			CHECK(pid[i] > 0);
		CHECK(pp_close(e[0]) == 0);
		CHECK(pp_close(e[1]) == 0);
		/* We let go: nothing of ours names the memfds any more. */
		CHECK_EQ(refs_in("self", ids), 0);
		/* ... but the others' do (the look below can see them). */
		CHECK(refs_anywhere(ids) > 0);
		int order[3] = { 0, 1, 2 };
		for (int i = 2; i > 0; i--) {
			int j = (int)cr_below((uint64_t)i + 1), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		for (int i = 0; i < 3; i++) {
			cr_sleep_us(cr_kill_delay_us(10000));
			kill(pid[order[i]], SIGKILL);
		}
		for (int i = 0; i < 3; i++) {
			int status = 0;
			CHECK(cr_reap(pid[i], 10, &status));
			CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		}
		double t0 = t_now();
		int refs;
		while ((refs = refs_anywhere(ids)) != 0 && t_now() - t0 < 3)
			cr_sleep_us(2000);
		double took = t_now() - t0;
		if (took > worst)
			worst = took;
		if (refs)
			fprintf(stderr, "  round %ld: %d references to the memfds left after %.1f s\n", round,
			        refs, took);
		CHECK_EQ(refs, 0);
		t_progress();
	}
	fprintf(stderr, "  memfds unreferenced within %.0f ms of the last death (worst)\n",
	        worst * 1e3);
}

int main(void)
{
	RUN(all_killed);
	return T_DONE();
}
