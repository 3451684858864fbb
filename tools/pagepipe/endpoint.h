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

/*
 * Hold each of descriptors 0, 1 and 2 that is closed at start on
 * /dev/null.  Otherwise the first file opened would take its number: with
 * `pagepipe -o a -o - >&-` the output a would also be "standard output"
 * and get the data twice, and with `2>&-` the messages would go into a
 * data file.  '-' for a descriptor held this way is then refused with
 * "standard output: Bad file descriptor" (or input).  Call before opening
 * anything.
 */
void pt_hold_std_fds(void);

/* Open the input: a descriptor, or -1 with a message printed.  name gets
 * what messages call it; *size its bytes left to read, or -1 when unknown
 * (anything but a regular file).  namelen is at least 4; a longer spec
 * is cut with "...". */
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
/* Check an endpoint's spelling before anything is opened: for tcp:HOST:PORT
 * (an input when listening), the form, a host for an output, and the
 * port (1..65535, 0 for an input, or a known service name).  0, or -1 with
 * the reason in err (a usage error). */
int pt_check_endpoint(const char *spec, bool listening, char *err, size_t errlen);

/* "pagepipe: " + message on stderr, in one write(2), so that lines from
 * several threads never interleave. */
void pt_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
