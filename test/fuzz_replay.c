/*
 * fuzz_replay.c - replay the fuzz corpora as an ordinary test, without
 * libFuzzer, so every build (gcc, ASan, TSan) runs them under `make check`.
 *
 * It compiles the fuzz targets in and runs each over its corpus directory
 * (relative to the repository root, where tests run):
 *   ops  test/fuzz/fuzz_ops.c       test/fuzz/corpus/     the core calls
 *        against a byte-exact model of every pipe, the kernel's coalescing
 *        and packet rules, pp_nread/pp_events/pp_fd and the pool's counters;
 *   zc   test/fuzz/fuzz_zerocopy.c  test/fuzz/corpus_zc/  the zero-copy
 *        calls (splice, tee, fan-out, vmsplice, splice to and from
 *        descriptors, peek/consume, reserve/commit) between several pipes,
 *        from a source file that is read or, once sealed, mapped, against
 *        the buffer-and-page model of test/fuzz/zc_model.c;
 *   hostile test/fuzz/fuzz_hostile.c test/fuzz/corpus_hostile/ a shared
 *        pipe whose control memory a misbehaving peer writes garbage over,
 *        between calls and (a forked scribbler) during them, reservations
 *        of its pages held across them;
 *   opts test/fuzz/fuzz_opts.c      test/fuzz/corpus_opts/ the command's
 *        option parser, tools/pagepipe/opts.c (only when that file exists).
 * (See each file for what one input exercises and checks.)  PP_FUZZ_CORPUS,
 * PP_FUZZ_CORPUS_ZC, PP_FUZZ_CORPUS_HOSTILE and PP_FUZZ_CORPUS_OPTS
 * override the directories.  Each
 * input runs in a child process, so one that aborts on a violated invariant
 * (or crashes, or leaks under ASan) fails its own case, "corpus/NAME",
 * "corpus_zc/NAME", "corpus_hostile/NAME" or "corpus_opts/NAME", and the
 * others still run.  A last case per target runs every input again in this
 * one process, one after another, as libFuzzer does: each input
 * must leave the process-wide page pool as it found it.  An empty or
 * missing corpus directory is a failure, so this test cannot pass by
 * replaying nothing.
 *
 * With file arguments it replays just those (e.g. a crash-* file that
 * tools/fuzz.sh found), with the target named by -t (ops by default, or
 * guessed from a path containing "zc", "hostile" or "opts"):
 *   build/test/fuzz_replay -t zc build-fuzz/artifacts/zc/crash-1234...
 */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness/harness.h"

#include "fuzz/fuzz_ops.c"
#define ZF_ENTRY fuzz_zerocopy_one
#include "fuzz/fuzz_zerocopy.c"
#define HF_ENTRY fuzz_hostile_one
#include "fuzz/fuzz_hostile.c"
#if __has_include("../tools/pagepipe/opts.c")
#define HAVE_OPTS 1
#define PO_ENTRY fuzz_opts_one
#include "fuzz/fuzz_opts.c"
#endif

struct target {
	const char *name;   /* for -t */
	const char *dir;    /* the corpus */
	const char *env;    /* overrides dir */
	const char *label;  /* case names: LABEL/NAME */
	const char *whole;  /* name of the one-process case */
	int (*one)(const uint8_t *, size_t);
};

static const struct target targets[] = {
	{ "ops", "test/fuzz/corpus", "PP_FUZZ_CORPUS", "corpus", "whole_corpus_one_process",
	  LLVMFuzzerTestOneInput },
	{ "zc", "test/fuzz/corpus_zc", "PP_FUZZ_CORPUS_ZC", "corpus_zc",
	  "whole_corpus_zc_one_process", fuzz_zerocopy_one },
	{ "hostile", "test/fuzz/corpus_hostile", "PP_FUZZ_CORPUS_HOSTILE", "corpus_hostile",
	  "whole_corpus_hostile_one_process", fuzz_hostile_one },
#ifdef HAVE_OPTS
	{ "opts", "test/fuzz/corpus_opts", "PP_FUZZ_CORPUS_OPTS", "corpus_opts",
	  "whole_corpus_opts_one_process", fuzz_opts_one },
#endif
};
#define NTARGETS (int)(sizeof targets / sizeof targets[0])

static const struct target *cur;
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
		/* A hung input fails itself, before the watchdog fails all. */
		alarm(t_case_timeout() / 2 + 1);
		cur->one(data, len);
		free(data);
		exit(0);
	}
	free(data);
	if (pid < 0)
		return;
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "input %s: %s %d (replay: build/test/fuzz_replay -t %s %s)\n", cur_path,
		        WIFSIGNALED(st) ? "killed by signal" : "exit status",
		        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), cur->name, cur_path);
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
		cur->one(data, len);
		free(data);
		t_progress();
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

static void clear_names(void)
{
	for (int i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	names = NULL;
	nnames = 0;
}

/* The cases of one target over names[]. */
static void run_target(void)
{
	char label[300];
	snprintf(label, sizeof label, "%s_not_empty", cur->label);
	t_run(cur == &targets[0] ? "corpus_not_empty" : label, corpus_not_empty);
	for (int i = 0; i < nnames; i++) {
		const char *base = strrchr(names[i], '/');
		snprintf(label, sizeof label, "%s/%s", cur->label, base ? base + 1 : names[i]);
		cur_path = names[i];
		t_run(label, replay_one);
	}
	t_run(cur->whole, whole_corpus_one_process);
}

static const struct target *find_target(const char *name)
{
	for (int i = 0; i < NTARGETS; i++)
		if (!strcmp(targets[i].name, name))
			return &targets[i];
	return NULL;
}

int main(int argc, char **argv)
{
	int a = 1;
	const struct target *only = NULL;
	if (a + 1 < argc && !strcmp(argv[a], "-t")) {
		only = find_target(argv[a + 1]);
		if (!only) {
			fprintf(stderr, "usage: %s [-t ops|zc|hostile|opts] [FILE...]\n", argv[0]);
			return 2;
		}
		a += 2;
	}
	if (a < argc) {
		corpus_dir = "(command line)";
		cur = only ? only : strstr(argv[a], "zc") ? find_target("zc") : &targets[0];
		if (!only && strstr(argv[a], "opts") && find_target("opts"))
			cur = find_target("opts");
		if (!only && strstr(argv[a], "hostile"))
			cur = find_target("hostile");
		for (int i = a; i < argc; i++)
			add_name(argv[i]);
		run_target();
		clear_names();
		return T_DONE();
	}

	for (int t = 0; t < NTARGETS; t++) {
		if (only && only != &targets[t])
			continue;
		struct dirent **list = NULL;
		cur = &targets[t];
		corpus_dir = getenv(cur->env);
		if (!corpus_dir || !*corpus_dir)
			corpus_dir = cur->dir;
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
		run_target();
		clear_names();
	}
	return T_DONE();
}
