/*
 * hello.c - the smallest complete use of pagepipe: make a pipe, let a
 * writer thread send a few lines and close its end, and read in the main
 * thread until end of file, exactly as with pipe(2), read(2) and write(2).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "pagepipe.h"

static void *writer(void *arg)
{
	struct pp_end *w = arg;
	const char *lines[] = { "hello from the writer thread\n",
	                        "through a pagepipe\n" };

	for (int i = 0; i < 2; i++)
		if (pp_write(w, lines[i], strlen(lines[i])) < 0)
			perror("pp_write");
	pp_close(w); /* the reader now sees end of file */
	return NULL;
}

int main(void)
{
	struct pp_end *ends[2]; /* [0] read end, [1] write end */
	pthread_t t;
	char buf[4096];
	ssize_t n;

	if (pp_pipe(ends, 0) != 0) {
		perror("pp_pipe");
		return 1;
	}
	pthread_create(&t, NULL, writer, ends[1]);
	while ((n = pp_read(ends[0], buf, sizeof buf)) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	if (n < 0)
		perror("pp_read");
	pthread_join(t, NULL);
	pp_close(ends[0]);
	return n < 0;
}
