/*
 * named_pipes.c - named pagepipes: pp_mkfifo and pp_open follow fifo(7).
 *
 * The rules (pagepipe.h pp_mkfifo, pp_open; fifo(7), open(2), mkfifo(3)),
 * each run on a kernel FIFO (mkfifo(3), open(2)) and on a named pagepipe
 * and compared where the kernel has the same case:
 *  - a blocking open for reading waits until a writer opens, and one for
 *    writing until a reader opens: the opener is seen asleep in the open
 *    and not returned, then returns once the peer opens;
 *  - a non-blocking open for reading succeeds with no writer (and reads
 *    end of file); a non-blocking open for writing with no reader fails
 *    with ENXIO, and succeeds once there is one;
 *  - pp_mkfifo on an existing path: EEXIST; in a missing directory:
 *    ENOENT; under a file: ENOTDIR; pp_open of a missing path: ENOENT; of
 *    something that is not a named pagepipe, or with bad flags: EINVAL;
 *  - each pp_open is its own open end, with its own status flags;
 *  - the permission bits decide who may open: as root, a child that
 *    becomes nobody (uid/gid 65534) gets EACCES opening a 0600 pipe and
 *    may open a 0666 one for reading and for writing (SKIP when not root);
 *  - data flows between two unrelated processes (each fork+exec'd, holding
 *    nothing of the other's) through the named pipe, to end of file.
 * The exec'd helpers are this program again, with "--helper".
 */
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>

#include "harness/fifo.h"
#include "harness/harness.h"
#include "harness/helpers.h"

#define BOUND_S 5.0

static char self_exe[4096];
static char dir[64]; /* a directory of this program's own, 0755 */

/* ---- a FIFO, kernel or pagepipe (harness/fifo.h), results as -errno ---- */

#define nf tp_fifo
#define nf_mk tp_fifo_mk
#define nf_rm tp_fifo_rm
#define nf_close tp_fifo_close

static long nf_open(struct nf *f, int kernel, const char *path, int wr, int nb)
{
	return tp_res(tp_fifo_open(f, kernel, path, wr, nb));
}

static long nf_read(struct nf *f, void *buf, size_t n)
{
	return tp_res(tp_fifo_read(f, buf, n));
}

static long nf_write(struct nf *f, const void *buf, size_t n)
{
	return tp_res(tp_fifo_write(f, buf, n));
}

static void path_of(char *p, size_t n, const char *name)
{
	snprintf(p, n, "%s/%s", dir, name);
}

static int reap(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* State letter of process pid (from /proc), or 0. */
static char proc_state(pid_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *s = strrchr(buf, ')');
	return s && s[1] == ' ' ? s[2] : 0;
}

/* Has fd a byte to read within ms? */
static int readable(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, ms) == 1;
}

/* ---- cases ------------------------------------------------------------- */

/*
 * A blocking open waits for the other side.  A child opens side `wr`
 * blocking; once it is asleep (5 looks 10 ms apart, bounded) and has not
 * said it returned, the parent opens the other side; the child's open
 * must then return (bounded), and a byte goes through.
 */
static void sc_blocking_open(struct tp_rec *r, int kernel, int wr)
{
	char path[128], c = 0;
	int rep[2];
	path_of(path, sizeof path, kernel ? "kfifo" : "ppfifo");
	CHECK_EQ(nf_mk(kernel, path, 0600), 0);
	CHECK_EQ(pipe2(rep, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct nf f;
		close(rep[0]);
		if (nf_open(&f, kernel, path, wr, 0) != 0)
			_exit(10);
		c = 'O';
		if (write(rep[1], &c, 1) != 1)
			_exit(11);
		char b = 'x';
		if (wr ? nf_write(&f, &b, 1) != 1 : nf_read(&f, &b, 1) != 1 || b != 'p')
			_exit(12);
		nf_close(&f);
		_exit(0);
	}
	close(rep[1]);
	int streak = 0;
	double end = t_now() + BOUND_S;
	while (streak < 5 && t_now() < end) {
		streak = proc_state(pid) == 'S' ? streak + 1 : 0;
		t_sleep_ms(10);
	}
	TP_REC(r, "the opener sleeps", streak >= 5);
	TP_REC(r, "and its open has not returned", readable(rep[0], 0));
	struct nf f;
	TP_REC(r, "the peer opens (blocking)", nf_open(&f, kernel, path, !wr, 0));
	TP_REC(r, "the opener's open returns", readable(rep[0], (int)(BOUND_S * 1000)));
	TP_REC(r, "said", read(rep[0], &c, 1) == 1 ? c : 0);
	char b = 'p';
	TP_REC(r, "a byte goes through", wr ? nf_read(&f, &b, 1) : nf_write(&f, &b, 1));
	TP_REC(r, "child", reap(pid));
	if (wr)
		TP_REC(r, "then end of file", nf_read(&f, &b, 1));
	nf_close(&f);
	close(rep[0]);
	nf_rm(kernel, path);
}

static void sc_read_waits(struct tp_rec *r, int kernel)
{
	sc_blocking_open(r, kernel, 0);
}

static void sc_write_waits(struct tp_rec *r, int kernel)
{
	sc_blocking_open(r, kernel, 1);
}

static void blocking_read_open_waits_for_writer(void)
{
	TP_BOTH_ALL(sc_read_waits);
}

static void blocking_write_open_waits_for_reader(void)
{
	TP_BOTH_ALL(sc_write_waits);
}

/* Non-blocking opens, fifo(7). */
static void sc_nonblocking(struct tp_rec *r, int kernel)
{
	char path[128], buf[8];
	struct nf rd, wr, rd2;
	path_of(path, sizeof path, kernel ? "kfifo" : "ppfifo");
	CHECK_EQ(nf_mk(kernel, path, 0600), 0);
	TP_REC(r, "write open, no reader", nf_open(&wr, kernel, path, 1, 1));
	TP_REC(r, "read open, no writer", nf_open(&rd, kernel, path, 0, 1));
	TP_REC(r, "read: end of file", nf_read(&rd, buf, sizeof buf));
	TP_REC(r, "write open, a reader", nf_open(&wr, kernel, path, 1, 1));
	TP_REC(r, "read: empty, a writer", nf_read(&rd, buf, sizeof buf));
	TP_REC(r, "write", nf_write(&wr, "abc", 3));
	TP_REC(r, "a second reader (blocking open: a writer exists)",
	       nf_open(&rd2, kernel, path, 0, 0));
	TP_REC(r, "read", nf_read(&rd, buf, 1));
	TP_REC(r, "second reader reads", nf_read(&rd2, buf, sizeof buf));
	nf_close(&wr);
	TP_REC(r, "read after the writer closed", nf_read(&rd, buf, sizeof buf));
	nf_close(&rd);
	nf_close(&rd2);
	TP_REC(r, "write open, readers gone", nf_open(&wr, kernel, path, 1, 1));
	nf_rm(kernel, path);
}

static void nonblocking_opens(void)
{
	TP_BOTH_ALL(sc_nonblocking);
}

/* What a pipe's data does when every end closed and it is opened again: a
 * kernel FIFO's data goes with its last end. */
static void sc_reopen(struct tp_rec *r, int kernel)
{
	char path[128], buf[8];
	struct nf rd, wr;
	path_of(path, sizeof path, kernel ? "kfifo" : "ppfifo");
	CHECK_EQ(nf_mk(kernel, path, 0600), 0);
	TP_REC(r, "read open", nf_open(&rd, kernel, path, 0, 1));
	TP_REC(r, "write open", nf_open(&wr, kernel, path, 1, 1));
	TP_REC(r, "write", nf_write(&wr, "lost", 4));
	nf_close(&wr);
	nf_close(&rd);
	TP_REC(r, "read open again", nf_open(&rd, kernel, path, 0, 1));
	TP_REC(r, "write open again", nf_open(&wr, kernel, path, 1, 1));
	TP_REC(r, "the old data is gone", nf_read(&rd, buf, sizeof buf));
	TP_REC(r, "write", nf_write(&wr, "new", 3));
	TP_REC(r, "read", nf_read(&rd, buf, sizeof buf));
	nf_close(&wr);
	nf_close(&rd);
	nf_rm(kernel, path);
}

static void reopen_after_all_closed(void)
{
	TP_BOTH_ALL(sc_reopen);
}

static void sc_errors(struct tp_rec *r, int kernel)
{
	char path[128], file[128], sub[160];
	struct nf f;
	path_of(path, sizeof path, kernel ? "kfifo" : "ppfifo");
	path_of(file, sizeof file, "file");
	snprintf(sub, sizeof sub, "%s/sub", file);
	int fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	TP_REC(r, "make", nf_mk(kernel, path, 0600));
	TP_REC(r, "make again", tp_res(nf_mk(kernel, path, 0600)));
	TP_REC(r, "make over a file", tp_res(nf_mk(kernel, file, 0600)));
	TP_REC(r, "make under a file", tp_res(nf_mk(kernel, sub, 0600)));
	TP_REC(r, "make in a missing directory",
	       tp_res(nf_mk(kernel, "/nonexistent-pp-dir/x", 0600)));
	nf_rm(kernel, path);
	TP_REC(r, "open a missing path", nf_open(&f, kernel, path, 0, 1));
	TP_REC(r, "open under a file", nf_open(&f, kernel, sub, 0, 1));
	unlink(file);
}

static void mkfifo_and_open_errors(void)
{
	TP_BOTH_ALL(sc_errors);
}

/* What only a named pagepipe can get wrong. */
static void pagepipe_only_errors(void)
{
	char path[128], file[128];
	path_of(path, sizeof path, "ppfifo");
	path_of(file, sizeof file, "file");
	int fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	CHECK_EQ(pp_mkfifo(path, 0600), 0);
	errno = 0;
	CHECK(pp_open(path, 0) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pp_open(path, PP_RDONLY | PP_WRONLY) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pp_open(path, PP_RDONLY | PP_SHARED) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pp_open(file, PP_RDONLY | PP_NONBLOCK) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pp_open(dir, PP_RDONLY | PP_NONBLOCK) == NULL && errno == EINVAL); /* a plain directory */
	errno = 0;
	CHECK(pp_open(NULL, PP_RDONLY) == NULL && errno == EFAULT);
	CHECK_ERR(pp_mkfifo(NULL, 0600), EFAULT);
	/* Nothing was left open by the failures: a non-blocking writer still
	 * finds no reader. */
	errno = 0;
	CHECK(pp_open(path, PP_WRONLY | PP_NONBLOCK) == NULL && errno == ENXIO);
	nf_rm(0, path);
	unlink(file);
}

/* Each pp_open is its own open end: its own status flags. */
static void each_open_own_flags(void)
{
	char path[128];
	char buf[4];
	path_of(path, sizeof path, "ppfifo");
	CHECK_EQ(pp_mkfifo(path, 0600), 0);
	struct pp_end *a = pp_open(path, PP_RDONLY | PP_NONBLOCK);
	struct pp_end *b = pp_open(path, PP_RDONLY | PP_NONBLOCK);
	struct pp_end *w = pp_open(path, PP_WRONLY | PP_NOSIGPIPE);
	CHECK(a && b && w);
	struct pp_end *ad = pp_dup(a);
	CHECK(ad != NULL);
	CHECK_EQ(pp_setfl(a, 0), 0);
	CHECK_EQ(pp_getfl(a) & PP_NONBLOCK, 0);
	CHECK_EQ(pp_getfl(ad) & PP_NONBLOCK, 0); /* a dup shares it */
	CHECK_EQ(pp_getfl(b) & PP_NONBLOCK, PP_NONBLOCK);
	CHECK_EQ(pp_getfl(w) & (PP_NONBLOCK | PP_NOSIGPIPE), PP_NOSIGPIPE);
	CHECK_ERR(pp_read(b, buf, 1), EAGAIN);
	CHECK_EQ(pp_write(w, "z", 1), 1);
	CHECK_EQ(pp_read(a, buf, 1), 1);
	pp_close(ad);
	pp_close(a);
	pp_close(b);
	CHECK_ERR(pp_write(w, "z", 1), EPIPE); /* PP_NOSIGPIPE: no signal */
	pp_close(w);
	nf_rm(0, path);
}

/* Permission bits, as another user.  Returns the child's exit status:
 * 0 when nobody got EACCES for the 0600 pipe and opened the 0666 one. */
static int as_nobody(const char *closed_path, const char *open_path)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(20);
		errno = 0;
		if (pp_open(closed_path, PP_RDONLY | PP_NONBLOCK) != NULL || errno != EACCES)
			_exit(10);
		errno = 0;
		if (pp_open(closed_path, PP_WRONLY | PP_NONBLOCK) != NULL || errno != EACCES)
			_exit(11);
		struct pp_end *r = pp_open(open_path, PP_RDONLY | PP_NONBLOCK);
		struct pp_end *w = r ? pp_open(open_path, PP_WRONLY | PP_NONBLOCK) : NULL;
		if (!r || !w)
			_exit(12);
		char c;
		if (pp_write(w, "n", 1) != 1 || pp_read(r, &c, 1) != 1 || c != 'n')
			_exit(13);
		pp_close(w);
		pp_close(r);
		_exit(0);
	}
	return reap(pid);
}

static void permission_bits(void)
{
	if (geteuid() != 0)
		SKIP("not root: cannot become another user to check the permission bits");
	char closed[128], open_[128];
	path_of(closed, sizeof closed, "closed");
	path_of(open_, sizeof open_, "open");
	mode_t old = umask(0);
	CHECK_EQ(pp_mkfifo(closed, 0600), 0);
	CHECK_EQ(pp_mkfifo(open_, 0666), 0);
	umask(old);
	CHECK_EQ(as_nobody(closed, open_), 0);
	/* The kernel's FIFOs, for comparison. */
	char kc[128], ko[128];
	path_of(kc, sizeof kc, "kclosed");
	path_of(ko, sizeof ko, "kopen");
	old = umask(0);
	CHECK_EQ(mkfifo(kc, 0600), 0);
	CHECK_EQ(mkfifo(ko, 0666), 0);
	umask(old);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(20);
		if (open(kc, O_RDONLY | O_NONBLOCK) >= 0 || errno != EACCES)
			_exit(10);
		if (open(ko, O_RDONLY | O_NONBLOCK) < 0)
			_exit(12);
		_exit(0);
	}
	CHECK_EQ(reap(pid), 0);
	nf_rm(0, closed);
	nf_rm(0, open_);
	unlink(kc);
	unlink(ko);
}

/* ---- two unrelated processes --------------------------------------------- */

/* argv: --helper read|write PATH BYTES.  Opens the named pipe (blocking),
 * writes the test stream or reads and checks it to end of file. */
static int helper(const char *mode, const char *path, long bytes)
{
	static char buf[65536];
	int wr = strcmp(mode, "write") == 0;
	struct pp_end *e = pp_open(path, wr ? PP_WRONLY : PP_RDONLY);
	if (!e)
		return 10;
	long done = 0;
	if (wr) {
		while (done < bytes) {
			size_t n = (size_t)(bytes - done) < sizeof buf ? (size_t)(bytes - done) : sizeof buf;
			tp_fill(buf, n, 99, (size_t)done);
			ssize_t w = pp_write(e, buf, n);
			if (w <= 0)
				return 11;
			done += w;
		}
	} else {
		ssize_t n;
		while ((n = pp_read(e, buf, sizeof buf)) > 0) {
			if (tp_verify(buf, (size_t)n, 99, (size_t)done) != -1)
				return 12;
			done += n;
		}
		if (n < 0 || done != bytes)
			return 13;
	}
	return pp_close(e) == 0 ? 0 : 14;
}

static pid_t spawn(const char *mode, const char *path, long bytes)
{
	char b[32];
	snprintf(b, sizeof b, "%ld", bytes);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		char *argv[] = { (char *)"named_pipes", (char *)"--helper", (char *)mode,
			             (char *)path, b, NULL };
		execv(self_exe, argv);
		_exit(20);
	}
	return pid;
}

static void unrelated_processes_stream(void)
{
	char path[128];
	path_of(path, sizeof path, "stream");
	CHECK_EQ(pp_mkfifo(path, 0600), 0);
	long bytes = t_scaled(4 << 20);
	/* The reader first: its blocking open waits for the writer. */
	pid_t rd = spawn("read", path, bytes);
	pid_t wr = spawn("write", path, bytes);
	t_progress_at("the two helpers streaming through the named pipe");
	CHECK_EQ(reap(wr), 0);
	CHECK_EQ(reap(rd), 0);
	nf_rm(0, path);
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--helper") == 0)
		return helper(argv[2], argv[3], atol(argv[4]));
	tp_self_exe(self_exe, sizeof self_exe);
	/* A tmpfs when there is one (design.md 13: keeps the pages off disk);
	 * searchable by all, for the permission case. */
	snprintf(dir, sizeof dir, "%s/pp_named_XXXXXX",
	         access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir) || chmod(dir, 0755) != 0) {
		perror("mkdtemp");
		return 2;
	}
	t_around_cases(tp_fds_note, tp_fds_same);
	RUN(blocking_read_open_waits_for_writer);
	RUN(blocking_write_open_waits_for_reader);
	RUN(nonblocking_opens);
	RUN(reopen_after_all_closed);
	RUN(mkfifo_and_open_errors);
	RUN(pagepipe_only_errors);
	RUN(each_open_own_flags);
	RUN(permission_bits);
	RUN(unrelated_processes_stream);
	rmdir(dir);
	return T_DONE();
}
