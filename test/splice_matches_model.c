/*
 * splice_matches_model.c - random sequences of pp_splice, pp_tee,
 * pp_fanout, pp_peek / pp_consume, writes, reads, resizes and closes
 * between five pagepipes do exactly what the model of splice_random.h
 * predicts: every return value and errno, every byte read, every pipe's
 * pp_nread, SIGPIPE, and the pool's pages in use after every step (so a
 * copy where a reference should be shared, or a reference lost or leaked,
 * shows at once).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice.h"
#include "splice_random.h"

static void random_model(void)
{
	run_random(0);
}

int main(void)
{
	random_setup();
	RUN(random_model);
	random_teardown();
	return T_DONE();
}
