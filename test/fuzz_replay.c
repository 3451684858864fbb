/*
 * fuzz_replay.c - replay the fuzz corpus as an ordinary test, without
 * libFuzzer, so every build (gcc, ASan, TSan) runs it under `make check`.
 *
 * It compiles the fuzz target test/fuzz/fuzz_ops.c in (see that file for
 * what one input exercises and checks: a byte-exact model of every pipe, the
 * kernel's coalescing and packet rules, pp_nread/pp_events/pp_fd, and the
 * page pool's counters) and runs it over every file in test/fuzz/corpus/
 * (relative to the repository root, where tests run; PP_FUZZ_CORPUS
 * overrides the directory).  Each input runs in a child process, so one
 * that aborts on a violated invariant (or crashes, or leaks under ASan)
 * fails its own case, "corpus/NAME", and the others still run.  A last case
 * runs every input again in this one process, one after another, as
 * libFuzzer does: each input must leave the process-wide page pool as it
 * found it.  An empty or missing corpus directory is a failure, so this
 * test cannot pass by replaying nothing.
 *
 * With file arguments it replays just those (e.g. a crash-* file that
 * tools/fuzz.sh found): build/test/fuzz_replay crash-1234...
 */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"

#include "fuzz/fuzz_ops.c"

#define REPLAY_SECS 60 /* per input, in the child; generous for TSan */

static const char *corpus_dir;
static char **names;   /* paths of the inputs */
static int nnames;
static const char *cur_path;

static int read_file(const char *path, uint8_t **data, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 4096, n = 0;
	uint8_t *buf = malloc(cap);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (n < cap)
			break;
		uint8_t *nb = realloc(buf, cap * 2);
		if (!nb) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	int bad = ferror(f);
	fclose(f);
	if (!buf || bad) {
		free(buf);
		return -1;
	}
	*data = buf;
	*len = n;
	return 0;
}

/* One input in a child process: exit status 0 means every check held. */
static void replay_one(void)
{
	uint8_t *data;
	size_t len;
	if (read_file(cur_path, &data, &len) != 0) {
		fprintf(stderr, "cannot read %s\n", cur_path);
		CHECK(0);
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		alarm(REPLAY_SECS);
		LLVMFuzzerTestOneInput(data, len);
		free(data);
		exit(0);
	}
	free(data);
	if (pid < 0)
		return;
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "input %s: %s %d (replay: build/test/fuzz_replay %s)\n", cur_path,
		        WIFSIGNALED(st) ? "killed by signal" : "exit status",
		        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), cur_path);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

static void corpus_not_empty(void)
{
	if (!nnames)
		fprintf(stderr, "no inputs in %s: the corpus is missing or empty\n", corpus_dir);
	CHECK(nnames > 0);
}

/* Every input in this process, in a row, as libFuzzer runs them. */
static void whole_corpus_one_process(void)
{
	CHECK(nnames > 0);
	for (int i = 0; i < nnames; i++) {
		uint8_t *data;
		size_t len;
		if (read_file(names[i], &data, &len) != 0) {
			CHECK(0);
			continue;
		}
		alarm(REPLAY_SECS);
		LLVMFuzzerTestOneInput(data, len);
		alarm(0);
		free(data);
	}
}

static int only_files(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

static void add_name(const char *path)
{
	char **nn = realloc(names, (size_t)(nnames + 1) * sizeof *names);
	if (!nn)
		exit(2);
	names = nn;
	names[nnames++] = strdup(path);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		corpus_dir = "(command line)";
		for (int i = 1; i < argc; i++)
			add_name(argv[i]);
	} else {
		struct dirent **list = NULL;
		corpus_dir = getenv("PP_FUZZ_CORPUS");
		if (!corpus_dir || !*corpus_dir)
			corpus_dir = "test/fuzz/corpus";
		int n = scandir(corpus_dir, &list, only_files, alphasort);
		for (int i = 0; i < n; i++) {
			char path[4096];
			struct stat sb;
			snprintf(path, sizeof path, "%s/%s", corpus_dir, list[i]->d_name);
			if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
				add_name(path);
			free(list[i]);
		}
		free(list);
	}

	RUN(corpus_not_empty);
	for (int i = 0; i < nnames; i++) {
		char label[300];
		const char *base = strrchr(names[i], '/');
		snprintf(label, sizeof label, "corpus/%s", base ? base + 1 : names[i]);
		cur_path = names[i];
		t_run(label, replay_one);
	}
	RUN(whole_corpus_one_process);

	for (int i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	return T_DONE();
}
