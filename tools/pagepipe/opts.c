/*
 * opts.c - command-line parsing for the pagepipe command.
 *
 * Everything here is pure: strings in, struct pt_opts or an error message
 * out.  Sizes accept the suffixes people type for mbuffer and pv (K, M, G,
 * T, powers of 1024, with an optional B or iB) and nothing vaguer: a size
 * that is not exactly understood is a usage error, never a guess.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "opts.h"

const char pt_usage[] =
	"Usage: pagepipe [OPTIONS] [-o OUTPUT]...\n"
	"Copy standard input (or -i SRC) to every OUTPUT (standard output when none),\n"
	"through a memory buffer; each output runs at its own pace.\n"
	"\n"
	"  -i, --input=SRC          read SRC: '-' (standard input), a file, or\n"
	"                           tcp:[HOST]:PORT (listen, read the first connection)\n"
	"  -o, --output=DST         write DST: '-' (standard output), a file, or\n"
	"                           tcp:HOST:PORT (connect); repeat for up to 64 outputs\n"
	"  -x, --exec=CMD           an output that is a command: run 'sh -c CMD' with its\n"
	"                           standard input fed at its own pace (its exit status counts)\n"
	"  -a, --append             append to output files instead of truncating them\n"
	"  -m, --memory=SIZE        buffer memory limit (default 64M, 64K..2G)\n"
	"  -s, --block=SIZE         transfer block size (default 128K, 4K..16M)\n"
	"  -P, --start-at=PCT       outputs start once the buffer is PCT% full (default 0)\n"
	"  -p, --resume-at=PCT      once full, resume reading below PCT% (default 100)\n"
	"  -L, --rate=RATE          limit each -o/-x named after this to RATE bytes/s (0: none)\n"
	"      --progress[=WHEN]    status line on stderr: auto (the default: on a\n"
	"                           terminal), always, never\n"
	"      --size=SIZE          the input's size, for the progress line's percentage\n"
	"                           and time left (known for a regular file)\n"
	"  -q, --quiet              no progress line, statistics or warnings\n"
	"      --stats              print a summary at the end\n"
	"      --output-error[=MODE]  on an output error: warn-nopipe (default), warn,\n"
	"                           exit, exit-nopipe (as tee)\n"
	"  -T, --spill=DIR          an output that falls half the buffer behind goes on\n"
	"                           from an unlinked temporary file in DIR until it\n"
	"                           catches up, instead of holding back the others\n"
	"      --spill-max=SIZE     at most SIZE bytes spilled on disk (default: no bound)\n"
	"      --no-splice          always buffer in pagepipe pages, never move data\n"
	"                           with the kernel's splice(2) (see the man page)\n"
	"  -h, --help               show this help and exit\n"
	"  -V, --version            show the version and exit\n"
	"\n"
	"SIZE and RATE: an integer with an optional K, M, G or T suffix (powers of 1024).\n"
	"Exit status: 0 success, 1 input or output error, 2 usage error,\n"
	"128+N stopped by signal N (SIGINT, SIGTERM).\n";

int pt_parse_size(const char *s, uint64_t *out)
{
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	uint64_t v = 0;
	while (isdigit((unsigned char)*s)) {
		unsigned d = (unsigned)(*s++ - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	int shift = 0;
	switch (tolower((unsigned char)*s)) {
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	case 't': shift = 40; break;
	}
	if (shift) {
		s++;
		if (v > UINT64_MAX >> shift)
			return -1;
		v <<= shift;
		if (tolower((unsigned char)s[0]) == 'i' && tolower((unsigned char)s[1]) == 'b')
			s += 2;
		else if (tolower((unsigned char)s[0]) == 'b')
			s++;
	} else if (tolower((unsigned char)*s) == 'b') {
		s++;
	}
	if (*s)
		return -1;
	*out = v;
	return 0;
}

int pt_parse_pct(const char *s, int *out)
{
	uint64_t v;
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	for (const char *p = s; *p; p++)
		if (!isdigit((unsigned char)*p))
			return -1;
	if (strlen(s) > 3 || pt_parse_size(s, &v) != 0 || v > 100)
		return -1;
	*out = (int)v;
	return 0;
}

static const struct option longopts[] = {
	{ "input", required_argument, NULL, 'i' },
	{ "output", required_argument, NULL, 'o' },
	{ "exec", required_argument, NULL, 'x' },
	{ "append", no_argument, NULL, 'a' },
	{ "memory", required_argument, NULL, 'm' },
	{ "block", required_argument, NULL, 's' },
	{ "start-at", required_argument, NULL, 'P' },
	{ "resume-at", required_argument, NULL, 'p' },
	{ "rate", required_argument, NULL, 'L' },
	{ "progress", optional_argument, NULL, 1 },
	{ "quiet", no_argument, NULL, 'q' },
	{ "stats", no_argument, NULL, 2 },
	{ "output-error", optional_argument, NULL, 3 },
	{ "no-splice", no_argument, NULL, 4 },
	{ "size", required_argument, NULL, 5 },
	{ "spill", required_argument, NULL, 'T' },
	{ "spill-max", required_argument, NULL, 6 },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

#define FAIL(...)                                       \
	do {                                            \
		snprintf(err, errlen, __VA_ARGS__);     \
		return PT_USAGE_ERROR;                  \
	} while (0)

/* A size option in [lo, hi]. */
static int size_arg(const char *what, const char *arg, uint64_t lo, uint64_t hi, uint64_t *out,
                    char *err, size_t errlen)
{
	if (pt_parse_size(arg, out) != 0) {
		snprintf(err, errlen, "invalid %s '%s'", what, arg);
		return -1;
	}
	if (*out < lo || *out > hi) {
		snprintf(err, errlen, "%s '%s' out of range (%llu..%llu bytes)", what, arg,
		         (unsigned long long)lo, (unsigned long long)hi);
		return -1;
	}
	return 0;
}

/*
 * The message for a long option getopt_long refused ("--NAME" or
 * "--NAME=VALUE").  With opterr 0 it does not say why, so the word is
 * looked at again and the reason given in getopt's words: a prefix of
 * several options is ambiguous (and they are listed), an option that takes
 * no argument was given one, or no option has that name.
 */
static void long_option_error(const char *arg, char *err, size_t errlen)
{
	const char *name = arg + 2;
	size_t len = strcspn(name, "=");
	const struct option *match = NULL;
	char list[512] = "";
	size_t at = 0;
	int n = 0;
	for (const struct option *lo = longopts; lo->name; lo++) {
		if (strncmp(lo->name, name, len))
			continue;
		if (strlen(lo->name) == len) { /* an exact name is never ambiguous */
			match = lo;
			n = 1;
			break;
		}
		match = lo;
		n++;
		if (at < sizeof list)
			at += (size_t)snprintf(list + at, sizeof list - at, " '--%s'", lo->name);
	}
	if (n > 1)
		snprintf(err, errlen, "option '--%.*s' is ambiguous; possibilities:%s", (int)len, name,
		         list);
	else if (n == 1 && name[len] == '=' && match->has_arg == no_argument)
		snprintf(err, errlen, "option '--%s' doesn't allow an argument", match->name);
	else
		snprintf(err, errlen, "unrecognized option '--%.*s'", (int)len, name);
}

enum pt_action pt_parse_args(int argc, char *argv[], struct pt_opts *o, char *err, size_t errlen)
{
	*o = (struct pt_opts){
		.input = "-",
		.memory = PT_MEM_DEFAULT,
		.block = PT_BLOCK_DEFAULT,
		.start_pct = 0,
		.resume_pct = 100,
		.progress = PT_PROGRESS_AUTO,
		.output_error = PT_OE_WARN_NOPIPE,
	};
	if (errlen)
		err[0] = 0;
	uint64_t rate = 0; /* the -L in force for the next -o */
	bool rate_seen = false;
	optind = 0;        /* full re-initialisation of GNU getopt */
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "+:i:o:x:am:s:P:p:L:T:qhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (!*optarg)
				FAIL("empty input name");
			o->input = optarg;
			break;
		case 'o':
		case 'x':
			if (!*optarg)
				FAIL(c == 'o' ? "empty output name" : "empty command");
			if (o->noutputs == PT_MAX_OUTPUTS)
				FAIL("too many outputs (at most %d)", PT_MAX_OUTPUTS);
			o->outputs[o->noutputs].name = optarg;
			o->outputs[o->noutputs].rate = rate;
			o->outputs[o->noutputs].command = c == 'x';
			o->noutputs++;
			break;
		case 'a':
			o->append = true;
			break;
		case 'm':
			if (size_arg("memory size", optarg, PT_MEM_MIN, PT_MEM_MAX, &o->memory, err,
			             errlen))
				return PT_USAGE_ERROR;
			break;
		case 's':
			if (size_arg("block size", optarg, PT_BLOCK_MIN, PT_BLOCK_MAX, &o->block, err,
			             errlen)) {
				/* pv's -s is the input's size: say where that is. */
				uint64_t v;
				if (errlen && pt_parse_size(optarg, &v) == 0 && v > PT_BLOCK_MAX &&
				    strlen(err) + 1 < errlen)
					snprintf(err + strlen(err), errlen - strlen(err),
					         "; the input's size, pv's -s, is --size=SIZE");
				return PT_USAGE_ERROR;
			}
			break;
		case 'P':
			if (pt_parse_pct(optarg, &o->start_pct))
				FAIL("invalid percentage '%s' for -P (0..100)", optarg);
			break;
		case 'p':
			if (pt_parse_pct(optarg, &o->resume_pct))
				FAIL("invalid percentage '%s' for -p (0..100)", optarg);
			break;
		case 'L':
			if (pt_parse_size(optarg, &rate))
				FAIL("invalid rate '%s'", optarg);
			rate_seen = true;
			break;
		case 1:
			if (!optarg || !strcmp(optarg, "auto"))
				o->progress = PT_PROGRESS_AUTO;
			else if (!strcmp(optarg, "always"))
				o->progress = PT_PROGRESS_ALWAYS;
			else if (!strcmp(optarg, "never"))
				o->progress = PT_PROGRESS_NEVER;
			else
				FAIL("invalid argument '%s' for --progress (auto, always, never)", optarg);
			break;
		case 'q':
			o->quiet = true;
			break;
		case 2:
			o->stats = true;
			break;
		case 3:
			if (!optarg || !strcmp(optarg, "warn-nopipe"))
				o->output_error = PT_OE_WARN_NOPIPE;
			else if (!strcmp(optarg, "warn"))
				o->output_error = PT_OE_WARN;
			else if (!strcmp(optarg, "exit"))
				o->output_error = PT_OE_EXIT;
			else if (!strcmp(optarg, "exit-nopipe"))
				o->output_error = PT_OE_EXIT_NOPIPE;
			else
				FAIL("invalid argument '%s' for --output-error "
				     "(warn, warn-nopipe, exit, exit-nopipe)", optarg);
			break;
		case 4:
			o->no_splice = true;
			break;
		case 5:
			if (size_arg("input size", optarg, 1, UINT64_MAX, &o->size, err, errlen))
				return PT_USAGE_ERROR;
			break;
		case 'T':
			if (!*optarg)
				FAIL("empty spill directory name");
			o->spill_dir = optarg;
			break;
		case 6:
			if (size_arg("spill size", optarg, PT_BLOCK_MIN, UINT64_MAX, &o->spill_max, err,
			             errlen))
				return PT_USAGE_ERROR;
			break;
		case 'h':
			return PT_HELP;
		case 'V':
			return PT_VERSION;
		case ':':
			FAIL("option '%s' requires an argument", argv[optind - 1]);
		default:
			if (!strncmp(argv[optind - 1], "--", 2)) {
				long_option_error(argv[optind - 1], err, errlen);
				return PT_USAGE_ERROR;
			}
			if (optopt > ' ' && optopt < 127)
				FAIL("invalid option -- '%c'", optopt);
			FAIL("unrecognized option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		FAIL("unexpected argument '%s' (outputs are named with -o)", argv[optind]);
	if (o->noutputs == 0) {
		o->outputs[0].name = "-";
		o->outputs[0].rate = rate_seen ? rate : 0;
		o->noutputs = 1;
	}
	if (o->quiet)
		o->progress = PT_PROGRESS_NEVER;
	if (o->block > o->memory)
		o->block = o->memory;
	if (o->spill_max && !o->spill_dir)
		FAIL("--spill-max needs a spill directory (-T DIR)");
	if (o->spill_max && o->spill_max < o->block)
		FAIL("--spill-max (%llu bytes) is less than a block (%llu bytes)",
		     (unsigned long long)o->spill_max, (unsigned long long)o->block);
	return PT_RUN;
}
