/*
 * opts.h - the pagepipe command's options, and the parser that fills them.
 *
 * The parser does no I/O and keeps no global state, so it can be tested
 * and fuzzed on its own (test/fuzz): it turns an argument vector into a
 * struct pt_opts, or an error message for the front end to print.
 */
#ifndef PAGEPIPE_TOOL_OPTS_H
#define PAGEPIPE_TOOL_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_MAX_OUTPUTS 64

#define PT_MEM_MIN (64ULL << 10)
#define PT_MEM_MAX (2ULL << 30)
#define PT_MEM_DEFAULT (64ULL << 20)
#define PT_BLOCK_MIN (4ULL << 10)
#define PT_BLOCK_MAX (16ULL << 20)
#define PT_BLOCK_DEFAULT (128ULL << 10)

enum pt_output_error {
	PT_OE_WARN_NOPIPE, /* the default, as tee -p */
	PT_OE_WARN,
	PT_OE_EXIT,
	PT_OE_EXIT_NOPIPE,
};

enum pt_progress { PT_PROGRESS_NEVER, PT_PROGRESS_AUTO, PT_PROGRESS_ALWAYS };

/* What the front end should do after parsing. */
enum pt_action { PT_RUN, PT_HELP, PT_VERSION, PT_USAGE_ERROR };

struct pt_output_opt {
	const char *name; /* "-", a path, or "tcp:HOST:PORT"; with -x, the command
	                   * (points into argv) */
	uint64_t rate;    /* bytes per second, 0 for unlimited */
	bool command;     /* -x: name is a command for sh -c, fed on its standard input */
};

struct pt_opts {
	const char *input;                 /* "-", a path or "tcp:[HOST]:PORT" */
	struct pt_output_opt outputs[PT_MAX_OUTPUTS];
	int noutputs;                      /* at least 1 after a PT_RUN parse */
	bool append;
	uint64_t memory;                   /* -m, bytes */
	uint64_t block;                    /* -s, bytes */
	int start_pct;                     /* -P, 0..100 */
	int resume_pct;                    /* -p, 0..100 */
	enum pt_progress progress;         /* auto unless --progress=WHEN or -q */
	uint64_t size;                     /* --size: the input's bytes, 0 when not given */
	bool quiet;
	bool stats;
	bool no_splice;                    /* --no-splice: never the kernel-splice path */
	const char *spill_dir;             /* -T: a lagging output's backlog goes on in a
	                                    * temporary file here; NULL: never */
	uint64_t spill_max;                /* --spill-max: bytes on disk at most, 0: no bound */
	enum pt_output_error output_error;
};

/*
 * Parse a SIZE: decimal digits, then an optional K, M, G or T (any case,
 * powers of 1024), then an optional "B" or "iB".  Returns 0 and sets *out,
 * or -1 for anything else (empty, sign, fraction, junk, overflow).
 */
int pt_parse_size(const char *s, uint64_t *out);

/* Parse a percentage 0..100 (plain decimal).  0, or -1. */
int pt_parse_pct(const char *s, int *out);

/*
 * Parse argv into *o (defaults first).  Uses getopt_long, so it resets
 * optind itself.  On PT_USAGE_ERROR, err holds the message (without the
 * "pagepipe: " prefix); getopt's own messages are suppressed.
 */
enum pt_action pt_parse_args(int argc, char *argv[], struct pt_opts *o, char *err, size_t errlen);

/* The --help text. */
extern const char pt_usage[];

#endif
