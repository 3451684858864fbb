/*
 * shared.c - the public calls of pipes between processes: making a shared
 * pipe and its handles (pp_pipe with PP_SHARED, pp_pipe_in, dup, close),
 * what a fork does to a process's pipes, and pp_shared_stats.  The memory,
 * lock and liveness underneath are shm.c's; export, import and named pipes
 * are export.c's.
 *
 * Fork.  A pthread_atfork prepare handler gives each shared memory the
 * process holds (one or more of its pipes) a holder record for the child,
 * with the parent's handle counts (added to the rings'), and read-locks
 * its byte on a new description of the ctl memfd.  The child takes that
 * description as its own and closes its copy of the parent's; the parent
 * closes its copy of the child's (if the fork failed, that drops the lock,
 * and the next reap undoes the record).  Everything else the child needs
 * it inherits: the memfds, the tokens, the eventfds.  Private pipes are not
 * the child's: a generation number bumped in the child makes every call on
 * their handles fail with EBADF there, and the pool's and the quarantine's
 * locks are taken across the fork so that the child's copies are
 * consistent.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "end.h"

/* ---- handles ---------------------------------------------------------------- */

int ppi_shm_pipe(struct pp_end *ends[2], int fl)
{
	struct ppi_shm *v;
	int err = ppi_shm_create(fl, &v);
	if (err) {
		errno = err;
		return -1;
	}
	ends[0] = ppi_end_new(v->ring, PPI_READ, v, 0);
	ends[1] = ends[0] ? ppi_end_new(v->ring, PPI_WRITE, v, 1) : NULL;
	if (!ends[1]) {
		free(ends[0]);
		ppi_shm_detach(v);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* pp_pipe_in: the ends are allocated first, so that nothing fails after
 * the pipe exists. */
int ppi_shm_pipe_in(struct pp_end *ends[2], int fl, struct pp_end *member)
{
	struct pp_end *e[2];
	e[0] = ppi_end_new(NULL, PPI_READ, NULL, 0);
	e[1] = e[0] ? ppi_end_new(NULL, PPI_WRITE, NULL, 0) : NULL;
	if (!e[1]) {
		free(e[0]);
		errno = ENOMEM;
		return -1;
	}
	struct ppi_shm *v;
	uint32_t desc[2];
	int err = ppi_shm_pipe_in_mem(member->shm, fl, &v, desc);
	if (err) {
		free(e[0]);
		free(e[1]);
		errno = err;
		return -1;
	}
	for (int s = 0; s < 2; s++) {
		e[s]->ring = v->ring;
		e[s]->shm = v;
		e[s]->desc = desc[s];
		ends[s] = e[s];
	}
	return 0;
}

struct pp_end *ppi_shm_dup(struct pp_end *end)
{
	struct ppi_shm *v = end->shm;
	struct pp_end *e = ppi_end_new(end->ring, end->side, v, end->desc);
	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	int err = ppi_shm_lock(v);
	if (!err) {
		unsigned closed;
		int gone;
		/* The caller's handle keeps the side open while we add one. */
		ppi_shm_handles(v, end->desc, end->side, 1, &closed, &gone);
		ppi_shm_unlock(v);
		return e;
	}
	free(e);
	errno = err;
	return NULL;
}

/*
 * Close a shared handle.  The handle is closed whatever happens, as
 * close(2) closes a descriptor even when it reports an error: if the lock
 * cannot be had (EIO), the process lets go of the pipe without telling the
 * others, who reap it once it has closed its descriptors.
 */
int ppi_shm_close(struct pp_end *end)
{
	struct ppi_shm *v = end->shm;
	int side = end->side;
	struct ppi_call c;
	unsigned closed = 0;
	int gone = 0;
	int err = ppi_call_lock(&c, v->ring, v, false);
	if (!err) {
		ppi_shm_handles(v, end->desc, side, -1, &closed, &gone);
		/* The process leaves the side: if what keeps it open elsewhere
		 * is only dead (an exported descriptor closed since, a process
		 * killed), the other side must hear it now, not at its next
		 * look. */
		if (!closed && !v->handles[side])
			closed = ppi_shm_reap(v, true);
		for (int s = 0; s < 2; s++)
			if (closed & (1u << s))
				ppi_call_owe(&c, 1 - s, INT_MAX); /* they must see EOF or EPIPE */
		ppi_call_unlock(&c);
	} else {
		/* Still counted in our record, which nobody reaps while we
		 * live: our next lock counts it out. */
		ppi_shm_unclosed_add(v, end->desc);
		pthread_mutex_lock(&v->m->mu);
		v->handles[side]--;
		gone = !v->handles[PPI_READ] && !v->handles[PPI_WRITE];
		pthread_mutex_unlock(&v->m->mu);
		/* (the holder record stays ours: the memory goes only when no
		 * pipe of it is held, and then with its liveness lock) */
	}
	ppi_shm_after_close(v, side, gone);
	ppi_end_retire(end);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

PPI_API int pp_shared_stats(struct pp_end *end, struct pp_shared_stats *st)
{
	if (!ppi_end_ring(end))
		return -1;
	if (!end->shm) {
		errno = EINVAL;
		return -1;
	}
	if (!st) {
		errno = EFAULT;
		return -1;
	}
	int err = ppi_shm_stats(end->shm, st);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* ---- fork ---------------------------------------------------------------------- */

/* For tests that fork at a chosen call and let the child go on with the
 * private pipes it had (test/fault.h): PP_DEBUG_FORK_KEEPS_PRIVATE=1 in the
 * environment leaves private handles valid in the child, a copy of the
 * parent's as of the fork, and takes no process-wide lock across the fork
 * (such a test forks from inside the library, maybe holding one; it has no
 * other thread).  Read before every fork, so a test can set it at any
 * time. */
static bool keep_private;

/* One of the process's pipes of memory m, to reach the memory through
 * (views lock held; m->mu is not needed: pipes come and go under the
 * views lock). */
static struct ppi_shm *mem_any_pipe(struct ppi_shm_mem *m)
{
	for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++)
		if (m->pipe[ri])
			return m->pipe[ri];
	return NULL;
}

static void fork_prepare(void)
{
	const char *keep = getenv("PP_DEBUG_FORK_KEEPS_PRIVATE");
	keep_private = keep && *keep == '1';
	if (!keep_private)
		ppi_fork_locks(true);
	ppi_shm_views_lock();
	for (struct ppi_shm_mem *m = ppi_shm_mems(); m; m = m->next) {
		m->child_fd = -1;
		struct ppi_shm *v = mem_any_pipe(m);
		if (!v || m->dead || ppi_shm_lock(v))
			continue;
		if (LOAD(v->m->unclosed))
			ppi_shm_unclosed_put(v); /* the child must not copy them */
		int fd = ppi_shm_reopen(v->m->ctl_fd, O_RDWR);
		int h = fd < 0 ? -1 : ppi_shm_holder_new(v, fd, PPI_HOLDER_PROC);
		if (h >= 0) {
			ppi_shm_holder_copy(v, v->m->holder, (uint32_t)h);
			v->m->child_fd = fd;
			v->m->child_holder = (uint32_t)h;
		} else if (fd >= 0) {
			close(fd);
		}
		ppi_shm_unlock(v);
	}
}

static void fork_parent(void)
{
	for (struct ppi_shm_mem *m = ppi_shm_mems(); m; m = m->next)
		if (m->child_fd >= 0) {
			close(m->child_fd); /* the child holds the lock now, or nobody */
			m->child_fd = -1;
		}
	ppi_shm_views_unlock();
	if (!keep_private)
		ppi_fork_locks(false);
}

static void fork_child(void)
{
	if (!keep_private)
		atomic_fetch_add_explicit(&ppi_fork_gen, 1, RELAXED);
	for (struct ppi_shm_mem *m = ppi_shm_mems(); m; m = m->next) {
		pthread_mutex_init(&m->mu, NULL); /* another thread may have held it */
		struct ppi_shm *v = mem_any_pipe(m);
		if (m->child_fd < 0 || !v) {
			m->dead = true; /* no record for us: every call fails EIO */
			continue;
		}
		close(m->ctl_fd); /* the parent's description: its lock stays the parent's */
		m->ctl_fd = m->child_fd;
		m->holder = m->child_holder;
		m->child_fd = -1;
		/* The parent's lost sleepers are its own to count out. */
		for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++)
			if (m->pipe[ri]) {
				atomic_store_explicit(&m->pipe[ri]->unslept[0], 0, RELAXED);
				atomic_store_explicit(&m->pipe[ri]->unslept[1], 0, RELAXED);
			}
		atomic_store_explicit(&ppi_shm_holders(v)[m->holder].pid, (uint32_t)getpid(), RELAXED);
	}
	ppi_shm_views_unlock();
	if (!keep_private)
		ppi_fork_locks(false);
}

__attribute__((constructor)) static void fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
