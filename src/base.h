/*
 * base.h - what every source file of the library includes first: the
 * public header, the checking builds' hooks (sanitize.h), and the few
 * macros and limits that every layer uses.
 *
 * Names.  Everything the library exports is pp_* and declared in
 * include/pagepipe.h.  Internal functions, globals, types and macros
 * shared between source files are ppi_* / PPI_*, so that a reader sees at a
 * glance what is API; a name local to one file has no prefix.
 */
#ifndef PPI_BASE_H
#define PPI_BASE_H

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pagepipe.h"
#include "sanitize.h"

/* Marks the definition of a public call: the shared library exports it
 * (built with -fvisibility=hidden, and libpagepipe.map lists pp_*). */
#define PPI_API __attribute__((visibility("default")))
#define PPI_INLINE static inline __attribute__((always_inline))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Relaxed atomic access, for fields whose lock or owner rule makes ordering
 * unnecessary (each use says which rule holds). */
#define RELAXED memory_order_relaxed
#define LOAD(x) atomic_load_explicit(&(x), RELAXED)

#define PPI_PAGE_MASK (PP_PAGE_SIZE - 1u)
#define PPI_MAX_RW 0x7ffff000ul /* read(2)/write(2) clamp: INT_MAX & page mask */

/* The splice family's flags: every call accepts all four (hints where they
 * mean nothing), as Linux does. */
#define PPI_SPLICE_FLAGS (PP_SPLICE_NONBLOCK | PP_SPLICE_MORE | PP_SPLICE_MOVE | PP_SPLICE_GIFT)

#endif
