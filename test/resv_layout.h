/*
 * resv_layout.h - whether a reservation's segments are laid out as
 * pp_reserve(3) promises, for every test that makes reservations:
 * reserve_commit, the zero-copy model (test/fuzz/zc_model.c, so
 * fault_zerocopy and the zero-copy fuzz target) and the hostile fuzz
 * target.  The segments depend on where the pages lie, so a test cannot
 * predict them; it predicts the pages and checks the layout.
 */
#ifndef PP_TEST_RESV_LAYOUT_H
#define PP_TEST_RESV_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "pagepipe.h"

/*
 * The pages that the segments iov[0..k) of a reservation for len bytes
 * hold, or -1 when they are not laid out as promised: each segment starts
 * a page and is a run of whole pages, only the last one ending inside a
 * page (where len ends); they cover len bytes, or fewer whole pages when
 * fewer pages could be had; in packet mode each is one page, otherwise
 * each is a whole run (no segment begins where the one before ends).
 */
static inline long resv_layout_pages(const struct iovec *iov, long k, size_t len, bool packet)
{
	long pages = 0;
	size_t at = 0;
	for (long i = 0; i < k; i++) {
		size_t c = iov[i].iov_len;
		const char *base = iov[i].iov_base;
		if (!c || (uintptr_t)base % PP_PAGE_SIZE || at + c > len ||
		    (i + 1 < k && c % PP_PAGE_SIZE) || (packet && c > PP_PAGE_SIZE) ||
		    (!packet && i && (const char *)iov[i - 1].iov_base + iov[i - 1].iov_len == base))
			return -1;
		pages += (long)((c + PP_PAGE_SIZE - 1) / PP_PAGE_SIZE);
		at += c;
	}
	return at == len || at % PP_PAGE_SIZE == 0 ? pages : -1;
}

#endif
