/*
 * splice_matches_kernel.c - the random sequences of splice_random.h run
 * on kernel pipes (pipe2, splice(2) with NULL offsets, tee(2)) and on
 * pagepipes, non-blocking: return values, errno, bytes, FIONREAD and
 * SIGPIPE must match each other and the model.
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice.h"
#include "splice_random.h"

static void random_vs_kernel(void)
{
	run_random(1);
}

int main(void)
{
	random_setup();
	RUN(random_vs_kernel);
	random_teardown();
	return T_DONE();
}
