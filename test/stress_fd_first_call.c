/*
 * stress_fd_first_call.c - pp_fd() makes an end's descriptor on its first
 * call; first calls racing from many threads must all get the same one.
 *
 *   fd_first_call_race   6 threads make the first pp_fd() calls on both ends
 *                        at once: one descriptor per end, none leaked.
 * After the case no page may remain in use in the pool (stress.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "threads.h"
#include "stress.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

/* pp_fd's first call, from many threads at once                       */

/*
 * pp_fd() makes its descriptor on the first call: racing first calls on an
 * end must all get the same one, and none may leak once the pipe is gone.
 */
static void fd_first_call_race(void)
{
	long iters = t_scaled_san(200);
	int before = tp_count_fds();
	for (long it = 0; it < iters && !t_case_failed; it++) {
		struct pp_end *e[2];
		struct gated c[6]; /* ret: the descriptor */
		pthread_t th[6];
		atomic_int go = 0, ready = 0;
		CHECK_EQ(pp_pipe(e, PP_NOSIGPIPE), 0);
		for (int i = 0; i < 6; i++) {
			c[i] = (struct gated){pp_fd, e[i % 2], &go, &ready, -2};
			start_thread(&th[i], gated_main, &c[i]);
		}
		wait_count(&ready, 6);
		atomic_store(&go, 1);
		for (int i = 0; i < 6; i++)
			join_thread(th[i]);
		for (int i = 0; i < 6; i++) {
			CHECK(c[i].ret >= 0);
			if (c[i].ret != c[i % 2].ret) {
				fprintf(stderr, "iteration %ld: %s end: pp_fd gave %d and %d "
				        "to racing first calls\n", it, i % 2 ? "write" : "read",
				        c[i % 2].ret, c[i].ret);
				CHECK(!"racing pp_fd calls got different descriptors");
			}
		}
		CHECK(c[0].ret != c[1].ret);
		CHECK_EQ(pp_fd(e[0]), c[0].ret);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(e[1]), 0);
		t_progress();
	}
	CHECK_EQ(tp_count_fds(), before);
}

int main(void)
{
	stress_start("stress_fd_first_call");
	RUN(fd_first_call_race);
	return T_DONE();
}
