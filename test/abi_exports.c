/*
 * abi_exports.c - the shared library exports exactly the calls the public
 * header declares, each under a version node of src/libpagepipe.map, and
 * every one of them resolves when the library is loaded.
 *
 * The declared calls are read from include/pagepipe.h (every `pp_name('
 * outside comments), the exports from `nm -D --defined-only' of the
 * library (binutils comes with the compiler).  Paths are compiled in by
 * the Makefile: PP_HEADER and PP_SHARED_LIB.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/harness.h"

#define MAX_NAMES 256

struct names {
	char *name[MAX_NAMES];
	int n;
};

static void add(struct names *s, const char *name, size_t len)
{
	for (int i = 0; i < s->n; i++)
		if (strlen(s->name[i]) == len && !strncmp(s->name[i], name, len))
			return;
	if (s->n < MAX_NAMES)
		s->name[s->n++] = strndup(name, len);
}

static bool has(const struct names *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->name[i], name))
			return true;
	return false;
}

/* Every `pp_name(' of the header, comments removed. */
static void declared(struct names *out)
{
	FILE *f = fopen(PP_HEADER, "r");
	CHECK(f != NULL);
	if (!f)
		return;
	static char text[1 << 20];
	size_t len = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[len] = 0;
	for (char *c = strstr(text, "/*"); c; c = strstr(c, "/*")) {
		char *end = strstr(c + 2, "*/");
		if (!end)
			break;
		memset(c, ' ', (size_t)(end + 2 - c));
	}
	for (char *p = strstr(text, "pp_"); p; p = strstr(p + 1, "pp_")) {
		if (p > text && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z')))
			continue; /* part of a longer name */
		size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz_0123456789");
		const char *q = p + n;
		while (*q == ' ')
			q++;
		if (*q == '(')
			add(out, p, n);
	}
}

/* The library's defined dynamic symbols, and whether each has a version. */
static void exported(struct names *out, int *unversioned)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", PP_SHARED_LIB);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	if (!p)
		return;
	char line[512];
	while (fgets(line, sizeof line, p)) {
		char addr[64], type[8], sym[400];
		if (sscanf(line, "%63s %7s %399s", addr, type, sym) != 3)
			continue;
		if (type[0] == 'A')
			continue; /* the version node itself */
		char *at = strchr(sym, '@');
		if (!at || strncmp(at, "@@PAGEPIPE_", 11))
			++*unversioned, fprintf(stderr, "export without a version: %s\n", sym);
		add(out, sym, at ? (size_t)(at - sym) : strlen(sym));
	}
	CHECK_EQ(pclose(p), 0);
}

static void exports_equal_header(void)
{
	struct names decl = { 0 }, exp = { 0 };
	int unversioned = 0;
	declared(&decl);
	exported(&exp, &unversioned);
	fprintf(stderr, "%d calls declared, %d symbols exported\n", decl.n, exp.n);
	CHECK(decl.n >= 20); /* the header was read */
	for (int i = 0; i < decl.n; i++)
		if (!has(&exp, decl.name[i])) {
			fprintf(stderr, "declared but not exported: %s\n", decl.name[i]);
			t_case_failed = 1;
		}
	for (int i = 0; i < exp.n; i++)
		if (!has(&decl, exp.name[i])) {
			fprintf(stderr, "exported but not declared: %s\n", exp.name[i]);
			t_case_failed = 1;
		}
	CHECK_EQ(unversioned, 0);
	for (int i = 0; i < decl.n; i++)
		free(decl.name[i]);
	for (int i = 0; i < exp.n; i++)
		free(exp.name[i]);
}

static void every_call_resolves(void)
{
	struct names decl = { 0 };
	declared(&decl);
	void *lib = dlopen(PP_SHARED_LIB, RTLD_NOW | RTLD_LOCAL);
	CHECK(lib != NULL);
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return;
	}
	for (int i = 0; i < decl.n; i++)
		if (!dlvsym(lib, decl.name[i], "PAGEPIPE_0.1")) {
			fprintf(stderr, "%s@PAGEPIPE_0.1 does not resolve\n", decl.name[i]);
			t_case_failed = 1;
		}
	dlclose(lib);
	for (int i = 0; i < decl.n; i++)
		free(decl.name[i]);
}

int main(void)
{
	RUN(exports_equal_header);
	RUN(every_call_resolves);
	return T_DONE();
}
