/*
 * endpoint.h - the pagepipe command's endpoints (endpoint.c): turn the
 * input's and the outputs' names ("-", a path, tcp:...) into descriptors,
 * and print the command's messages.
 */
#ifndef PAGEPIPE_TOOL_ENDPOINT_H
#define PAGEPIPE_TOOL_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Open the input: a descriptor, or -1 with a message printed.  name gets
 * what messages call it; *size its bytes left to read, or -1 when unknown
 * (anything but a regular file). */
int pt_open_input(const char *spec, char *name, size_t namelen, int64_t *size);

/* Open an output (created, truncated unless append): a descriptor, or -1
 * with a message printed.  name gets what messages call it. */
int pt_open_output(const char *spec, bool append, char *name, size_t namelen);

/* Start an output command (-x): 'sh -c cmd' with its standard input the
 * read end of a new kernel pipe, whose write end is returned (close-on-exec,
 * as every descriptor the command must not hold); *pid gets the child.
 * The child gets default SIGPIPE, SIGINT and SIGTERM and no blocked
 * signals, whatever this process does with them, and inherits standard
 * output and standard error.  -1 with a message printed when it cannot be
 * started (a command that sh cannot find is started, and exits 127). */
int pt_open_command(const char *cmd, char *name, size_t namelen, pid_t *pid);

/* "pagepipe: " + message on stderr, in one write(2), so that lines from
 * several threads never interleave. */
void pt_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
