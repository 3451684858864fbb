/*
 * fuzz_opts.c - libFuzzer target: the pagepipe command's option parser
 * (tools/pagepipe/opts.c, compiled in here: it does no I/O and keeps no
 * state but getopt's).
 *
 * The input is a series of steps; the first byte of each picks one:
 *   size string   the next bytes (up to a 0 byte, at most 40) as a SIZE for
 *                 pt_parse_size: it must accept exactly what an independent
 *                 reading of the grammar accepts (digits, then K/M/G/T in
 *                 any case, then B or iB; B alone; no overflow of 64 bits)
 *                 and give the same value;
 *   size value    8 bytes make a value x and a byte a way to print it
 *                 (plain, with the largest suffix that divides it, in lower
 *                 or upper case, with B or iB, leading zeros): parsing the
 *                 printed text must give x back, parse(print(x)) == x;
 *   percentage    bytes as a string for pt_parse_pct: accepted exactly when
 *                 1-3 digits worth at most 100, with that value;
 *   argv          a whole argument vector made of tokens (every option, long
 *                 and short, abbreviated, glued to its value or not, values
 *                 valid and not, "--", stray words, raw bytes of the input)
 *                 for pt_parse_args, with an error buffer of a random size:
 *                   - it returns one of the four actions, and the same
 *                     result when run twice on the same vector (getopt's
 *                     state is reset), and leaves the vector as it was (no
 *                     permutation);
 *                   - the error buffer is written only within its size and
 *                     holds a terminated, non-empty message exactly on a
 *                     usage error, printable when the arguments are;
 *                   - after PT_RUN every field is in range: 1..64 outputs
 *                     with non-empty names that are argv strings (or the
 *                     default "-"), memory 64K..2G, block 4K..16M and at most
 *                     memory, percentages 0..100, known enum values, no
 *                     progress line when quiet; and printing the result as a
 *                     canonical vector ("--memory=N", "--rate=R" before each
 *                     "--output=NAME", ...) and parsing that again gives the
 *                     same options.
 * Any violation prints the step and calls abort().  Built by tools/fuzz.sh
 * (clang -fsanitize=fuzzer) and #included by test/fuzz_replay.c, which
 * replays test/fuzz/corpus_opts/ in `make check` (the entry point renamed
 * through PO_ENTRY).
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_report.h"
#include "../../tools/pagepipe/opts.c"

#ifndef PO_ENTRY
#define PO_ENTRY LLVMFuzzerTestOneInput
#endif
int PO_ENTRY(const uint8_t *data, size_t size);

#define PO_MAX_ARGS 160
#define PO_MAX_STR 48

static struct fuzz_report po_rep = { .target = "fuzz_opts" };

#define PO_CHECK(cond, ...) FUZZ_CHECK(&po_rep, cond, __VA_ARGS__)

/* Up to max bytes, to a 0 byte or the end, into s (terminated). */
static size_t po_string(struct fuzz_in *in, char *s, size_t max)
{
	size_t k = 0;
	while (in->n && k < max) {
		unsigned c = fuzz_byte(in);
		if (!c)
			break;
		s[k++] = (char)c;
	}
	s[k] = 0;
	return k;
}

/* ---- SIZE: an independent reading of the grammar ---------------------------- */

static int po_ref_size(const char *s, uint64_t *out)
{
	size_t i = 0;
	unsigned __int128 v = 0;
	if (!(s[0] >= '0' && s[0] <= '9'))
		return -1;
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		v = v * 10 + (unsigned)(s[i] - '0');
		if (v > UINT64_MAX)
			return -1;
	}
	const char *rest = s + i;
	static const char units[] = "kmgt";
	const char *u = *rest ? strchr(units, tolower((unsigned char)*rest)) : NULL;
	if (u) {
		v <<= 10 * (unsigned)(u - units + 1);
		if (v > UINT64_MAX)
			return -1;
		rest++;
		if (!strcasecmp(rest, "ib") || !strcasecmp(rest, "b"))
			rest += strlen(rest);
	} else if ((*rest == 'b' || *rest == 'B') && !rest[1]) {
		rest++;
	}
	if (*rest)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static void po_size_string(struct fuzz_in *in)
{
	char s[PO_MAX_STR + 1];
	po_string(in, s, 40);
	snprintf(po_rep.op, sizeof po_rep.op, "pt_parse_size(\"%s\")", s);
	uint64_t got = 0xdeadbeef, want = 0;
	int r = pt_parse_size(s, &got), rw = po_ref_size(s, &want);
	PO_CHECK(r == rw, "returned %d, the grammar says %d", r, rw);
	PO_CHECK(r != 0 || got == want, "gave %" PRIu64 ", want %" PRIu64, got, want);
	PO_CHECK(r == 0 || got == 0xdeadbeef, "wrote %" PRIu64 " on failure", got);
}

/* print(x) in one of several forms; parse must give x back. */
static void po_size_value(struct fuzz_in *in)
{
	uint64_t x = 0;
	for (int k = 0; k < 8; k++)
		x |= (uint64_t)fuzz_byte(in) << (8 * k);
	unsigned form = fuzz_byte(in);
	/* Small values too, most of the time. */
	if (form & 0x80)
		x >>= (form & 0x3f);
	static const char sfx[] = "KMGT";
	int unit = 0; /* the largest suffix that divides x (at most T) */
	while (unit < 4 && x && x % ((uint64_t)1 << (10 * (unit + 1))) == 0)
		unit++;
	if (form & 0x40)
		unit = 0; /* plain digits */
	char s[64];
	int zeros = (form >> 3) & 3;
	uint64_t shown = unit ? x >> (10 * unit) : x;
	const char *tail[] = { "", "B", "iB", "ib" };
	int t = unit ? (int)(form & 3) : ((form & 1) ? 1 : 0);
	snprintf(s, sizeof s, "%.*s%" PRIu64 "%s%s", zeros, "000", shown,
	         unit ? (char[]){ (form & 4) ? (char)tolower(sfx[unit - 1]) : sfx[unit - 1], 0 } : "",
	         tail[t]);
	snprintf(po_rep.op, sizeof po_rep.op, "pt_parse_size(print(%" PRIu64 ") = \"%s\")", x, s);
	uint64_t got = 0;
	PO_CHECK(pt_parse_size(s, &got) == 0, "rejected");
	PO_CHECK(got == x, "gave %" PRIu64 ", want %" PRIu64, got, x);
}

static void po_pct(struct fuzz_in *in)
{
	char s[PO_MAX_STR + 1];
	po_string(in, s, 6);
	snprintf(po_rep.op, sizeof po_rep.op, "pt_parse_pct(\"%s\")", s);
	int got = -7;
	int r = pt_parse_pct(s, &got);
	size_t len = strlen(s);
	bool digits = len >= 1 && len <= 3 && strspn(s, "0123456789") == len;
	int v = digits ? atoi(s) : -1;
	bool ok = digits && v <= 100;
	PO_CHECK((r == 0) == ok, "returned %d for a string that is %s", r,
	         ok ? "a percentage" : "no percentage");
	PO_CHECK(!ok || got == v, "gave %d, want %d", got, v);
	PO_CHECK(ok || got == -7, "wrote %d on failure", got);
}

/* ---- argv --------------------------------------------------------------------- */

static const char *const po_tokens[] = {
	"-i", "-o", "-a", "-m", "-s", "-P", "-p", "-L", "-q", "-h", "-V",
	"--input", "--input=", "--output", "--output=", "--append", "--memory", "--memory=",
	"--block", "--block=", "--start-at", "--start-at=", "--resume-at=", "--resume-at",
	"--rate", "--rate=", "--progress", "--progress=", "--quiet", "--stats",
	"--output-error", "--output-error=", "--no-splice", "--help", "--version",
	"--", "-", "-qa", "-aq", "-m64K", "-s4K", "-o-", "-ofile", "-L0", "-P50", "--mem=", "--o",
	"--out=", "--pro", "--st", "--quiet=1", "--stats=x", "--help=no", "-x", "--bogus", "-:",
	"64K", "64k", "2G", "2g", "1T", "3G", "63K", "65536", "4096", "4K", "16M", "16m", "17M",
	"128KiB", "1kb", "0", "100", "50", "101", "007", "-1", "1.5K", "K", "", "auto", "always",
	"never", "sometimes", "warn", "warn-nopipe", "exit", "exit-nopipe", "file", "out.txt",
	"tcp:host:1", "tcp::2", "x", " ", "=", "18446744073709551615", "18446744073709551616",
	"17179869184G",
};
#define PO_NTOKENS (sizeof po_tokens / sizeof po_tokens[0])

struct po_argv {
	int argc;
	char *argv[PO_MAX_ARGS + 1];
	char store[PO_MAX_ARGS][2 * PO_MAX_STR + 2];
};

/* Arguments: a token, a token glued to the next one (bit 7), or raw bytes. */
static void po_make_argv(struct fuzz_in *in, struct po_argv *a)
{
	unsigned n = 1 + fuzz_byte(in) % PO_MAX_ARGS;
	a->argc = 0;
	a->argv[a->argc] = a->store[a->argc];
	strcpy(a->store[a->argc++], "pagepipe");
	while ((unsigned)a->argc < n && in->n) {
		char *s = a->store[a->argc];
		unsigned c = fuzz_byte(in);
		s[0] = 0;
		if ((c & 0x7f) == 0x7f) {
			po_string(in, s, PO_MAX_STR);
		} else {
			strcpy(s, po_tokens[(c & 0x7f) % PO_NTOKENS]);
			if (c & 0x80) {
				unsigned d = fuzz_byte(in);
				strcat(s, po_tokens[d % PO_NTOKENS]);
			}
		}
		a->argv[a->argc++] = s;
	}
	a->argv[a->argc] = NULL;
}

static bool po_in_argv(const struct po_argv *a, const char *p)
{
	for (int i = 0; i < a->argc; i++) {
		size_t len = strlen(a->argv[i]);
		if (p >= a->argv[i] && p <= a->argv[i] + len)
			return true;
	}
	return false;
}

static bool po_same(const struct pt_opts *x, const struct pt_opts *y)
{
	if (strcmp(x->input, y->input) || x->noutputs != y->noutputs || x->append != y->append ||
	    x->memory != y->memory || x->block != y->block || x->start_pct != y->start_pct ||
	    x->resume_pct != y->resume_pct || x->progress != y->progress || x->quiet != y->quiet ||
	    x->stats != y->stats || x->no_splice != y->no_splice || x->output_error != y->output_error)
		return false;
	for (int i = 0; i < x->noutputs; i++)
		if (strcmp(x->outputs[i].name, y->outputs[i].name) ||
		    x->outputs[i].rate != y->outputs[i].rate)
			return false;
	return true;
}

static void po_describe(const struct po_argv *a)
{
	size_t at = 0;
	at += (size_t)snprintf(po_rep.op, sizeof po_rep.op, "pt_parse_args(");
	for (int i = 1; i < a->argc && at < sizeof po_rep.op - 8; i++)
		at += (size_t)snprintf(po_rep.op + at, sizeof po_rep.op - at, "%s\"%s\"", i > 1 ? " " : "",
		                       a->argv[i]);
	if (at < sizeof po_rep.op - 2)
		snprintf(po_rep.op + at, sizeof po_rep.op - at, ")");
}

/* The options as a canonical vector: parse(print(o)) must be o. */
static void po_reparse(const struct pt_opts *o)
{
	static char buf[PT_MAX_OUTPUTS * 2 + 16][PO_MAX_STR * 2 + 32];
	char *argv[PT_MAX_OUTPUTS * 2 + 17];
	int n = 0;
	static const char *const prog[] = { "never", "auto", "always" };
	static const char *const oe[] = { "warn-nopipe", "warn", "exit", "exit-nopipe" };
#define PO_ARG(...) (snprintf(buf[n], sizeof buf[n], __VA_ARGS__), argv[n] = buf[n], n++)
	PO_ARG("pagepipe");
	PO_ARG("--input=%s", o->input);
	PO_ARG("--memory=%" PRIu64, o->memory);
	PO_ARG("--block=%" PRIu64, o->block);
	PO_ARG("--start-at=%d", o->start_pct);
	PO_ARG("--resume-at=%d", o->resume_pct);
	PO_ARG("--progress=%s", prog[o->progress]);
	PO_ARG("--output-error=%s", oe[o->output_error]);
	if (o->append)
		PO_ARG("-a");
	if (o->quiet)
		PO_ARG("--quiet");
	if (o->stats)
		PO_ARG("--stats");
	if (o->no_splice)
		PO_ARG("--no-splice");
	for (int i = 0; i < o->noutputs; i++) {
		PO_ARG("--rate=%" PRIu64, o->outputs[i].rate);
		PO_ARG("--output=%s", o->outputs[i].name);
	}
#undef PO_ARG
	argv[n] = NULL;
	struct pt_opts again;
	char err[256];
	enum pt_action r = pt_parse_args(n, argv, &again, err, sizeof err);
	PO_CHECK(r == PT_RUN, "the options printed back (%s ...) do not parse: %d %s", buf[1], r, err);
	PO_CHECK(po_same(o, &again), "the options printed back parse to other options");
}

static void po_args(struct fuzz_in *in)
{
	static struct po_argv a, copy;
	po_make_argv(in, &a);
	size_t errlen = fuzz_byte(in) % 200;
	po_describe(&a);
	copy = a;
	for (int i = 0; i < a.argc; i++)
		copy.argv[i] = a.argv[i];

	char err[256 + 16];
	memset(err, 0x5a, sizeof err);
	struct pt_opts o;
	memset(&o, 0xa5, sizeof o);
	enum pt_action r = pt_parse_args(a.argc, a.argv, &o, errlen ? err : NULL, errlen);
	PO_CHECK(r == PT_RUN || r == PT_HELP || r == PT_VERSION || r == PT_USAGE_ERROR,
	         "returned action %d", (int)r);
	for (size_t k = errlen; k < sizeof err; k++)
		PO_CHECK((unsigned char)err[k] == 0x5a, "the error buffer (%zu bytes) was written at %zu",
		         errlen, k);
	if (errlen) /* (a 1-byte buffer holds only the terminator) */
		PO_CHECK(memchr(err, 0, errlen) != NULL, "the error message is not terminated");
	if (errlen > 1)
		PO_CHECK((r == PT_USAGE_ERROR) == (err[0] != 0),
		         "action %d with error message \"%s\"", (int)r, err);
	/* A message made of printable arguments is printable: it is shown
	 * to a person (no option's internal code as a control character).
	 * -DPO_SKIP_PRINTABLE (FUZZ_CFLAGS) fuzzes past a known finding. */
#ifdef PO_SKIP_PRINTABLE
	bool printable = false;
#else
	bool printable = true;
#endif
	for (int i = 0; i < a.argc; i++)
		for (const char *c = a.argv[i]; *c; c++)
			printable &= isprint((unsigned char)*c) != 0;
	for (size_t k = 0; errlen && printable && err[k]; k++)
		PO_CHECK(isprint((unsigned char)err[k]), "the error message has byte %#x at %zu: \"%s\"",
		         (unsigned char)err[k], k, err);
	for (int i = 0; i <= a.argc; i++)
		PO_CHECK(a.argv[i] == copy.argv[i] && (!a.argv[i] || !strcmp(a.argv[i], copy.store[i])),
		         "argv[%d] was changed", i);

	/* The same again: getopt starts afresh. */
	struct pt_opts o2;
	char err2[256];
	memset(&o2, 0xa5, sizeof o2);
	enum pt_action r2 = pt_parse_args(a.argc, a.argv, &o2, err2, sizeof err2);
	PO_CHECK(r2 == r, "a second parse of the same vector gave action %d, then %d", (int)r,
	         (int)r2);
	if (r != PT_RUN)
		return;
	PO_CHECK(po_same(&o, &o2), "a second parse of the same vector gave other options");

	PO_CHECK(o.input && *o.input && (po_in_argv(&a, o.input) || !strcmp(o.input, "-")),
	         "input name");
	PO_CHECK(o.noutputs >= 1 && o.noutputs <= PT_MAX_OUTPUTS, "%d outputs", o.noutputs);
	for (int i = 0; i < o.noutputs; i++)
		PO_CHECK(o.outputs[i].name && *o.outputs[i].name &&
		         (po_in_argv(&a, o.outputs[i].name) || !strcmp(o.outputs[i].name, "-")),
		         "output %d's name", i);
	PO_CHECK(o.memory >= PT_MEM_MIN && o.memory <= PT_MEM_MAX, "memory %" PRIu64, o.memory);
	PO_CHECK(o.block >= PT_BLOCK_MIN && o.block <= PT_BLOCK_MAX && o.block <= o.memory,
	         "block %" PRIu64 " (memory %" PRIu64 ")", o.block, o.memory);
	PO_CHECK(o.start_pct >= 0 && o.start_pct <= 100 && o.resume_pct >= 0 && o.resume_pct <= 100,
	         "percentages %d %d", o.start_pct, o.resume_pct);
	PO_CHECK(o.progress <= PT_PROGRESS_ALWAYS && o.output_error <= PT_OE_EXIT_NOPIPE,
	         "enums %d %d", (int)o.progress, (int)o.output_error);
	PO_CHECK(!o.quiet || o.progress == PT_PROGRESS_NEVER, "a progress line although quiet");
	po_reparse(&o);
}

int PO_ENTRY(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	po_rep.step = 0;
	while (in.n) {
		unsigned op = fuzz_byte(&in);
		po_rep.step++;
		switch (op % 4) {
		case 0: po_size_string(&in); break;
		case 1: po_size_value(&in); break;
		case 2: po_pct(&in); break;
		default: po_args(&in); break;
		}
	}
	return 0;
}
