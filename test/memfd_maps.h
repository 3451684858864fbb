/*
 * memfd_maps.h - how much of a memfd this process has mapped, read from
 * /proc/self/maps, for the tests of mapped file pages (pp_splice_from_fd
 * from a sealed file): splice_file_pages, fault_zerocopy and the zero-copy
 * fuzz target.  A memfd's mappings are named "/memfd:NAME (deleted)".
 */
#ifndef PP_TEST_MEMFD_MAPS_H
#define PP_TEST_MEMFD_MAPS_H

#include <stdio.h>
#include <string.h>

/* Bytes mapped of the memfd called name, and in *count (if not NULL) how
 * many mappings; -1 when /proc/self/maps cannot be read. */
static inline long memfd_mapped(const char *name, int *count)
{
	char want[256], line[512];
	snprintf(want, sizeof want, "/memfd:%s ", name);
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	long bytes = 0;
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (strstr(line, want) && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
			bytes += (long)(hi - lo);
			n++;
		}
	}
	fclose(f);
	if (count)
		*count = n;
	return bytes;
}

#endif
