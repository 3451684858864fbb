/*
 * endpoint.c - turn the command's input and output names into descriptors.
 *
 *   "-"               standard input / standard output
 *   tcp:HOST:PORT     an output: connect to HOST (a name, an IPv4 address or
 *                     [an IPv6 address]) on PORT
 *   tcp:[HOST]:PORT   an input: listen on HOST (all addresses when empty)
 *                     and read the first connection accepted
 *   anything else     a file path
 *
 * Each function prints its own message on failure, so the caller only
 * decides what a failure means for the exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "endpoint.h"

/*
 * A kernel pipe on either side of the command is a 64 KiB window that costs
 * a context switch each time it fills or drains; grow it to up to 1 MiB
 * (the unprivileged maximum) so the neighbours in the pipeline run in longer
 * bursts.  Best effort: the pipe keeps its size if the kernel refuses.
 */
static void grow_kernel_pipe(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
		return;
	for (int size = 1 << 20; size > 65536; size >>= 1)
		if (fcntl(fd, F_SETPIPE_SZ, size) >= 0)
			return;
}

void pt_msg(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(line, sizeof line, "pagepipe: ");
	vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	/* One write, so lines from several threads never interleave. */
	ssize_t w = write(STDERR_FILENO, line, strlen(line));
	(void)w;
}

/*
 * Name an endpoint for messages: the spec as given, cut with "..." when it
 * does not fit.  Not snprintf("%s"): gcc 12's format-truncation check
 * (with -fsanitize=undefined at -O2) calls that a possible truncation or a
 * null argument; the cut is made here on purpose, and len is at least 4.
 */
static void set_name(char *name, size_t len, const char *spec)
{
	size_t n = strlen(spec);
	if (n < len) {
		memcpy(name, spec, n + 1);
		return;
	}
	memcpy(name, spec, len - 4);
	memcpy(name + len - 4, "...", 4);
}

/* Split "HOST:PORT" (HOST may be "[v6]" or empty) into host and port. */
static int split_hostport(const char *s, char *host, size_t hostlen, char *port, size_t portlen)
{
	const char *colon;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -1;
		if ((size_t)(end - s - 1) >= hostlen)
			return -1;
		memcpy(host, s + 1, (size_t)(end - s - 1));
		host[end - s - 1] = 0;
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= hostlen)
			return -1;
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = 0;
	}
	if (!colon[1] || strlen(colon + 1) >= portlen)
		return -1;
	strcpy(port, colon + 1);
	return 0;
}

static int tcp_open(const char *spec, bool listening)
{
	char host[256], port[32];
	if (split_hostport(spec + 4, host, sizeof host, port, sizeof port) != 0) {
		pt_msg("%s: expected tcp:HOST:PORT", spec);
		errno = EINVAL;
		return -1;
	}
	if (!listening && !host[0]) {
		pt_msg("%s: an output needs a host", spec);
		errno = EINVAL;
		return -1;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
		                  .ai_flags = listening ? AI_PASSIVE : 0 };
	struct addrinfo *res;
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc != 0) {
		pt_msg("%s: %s", spec, gai_strerror(rc));
		errno = EINVAL;
		return -1;
	}
	int fd = -1, err = 0;
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		if (listening) {
			int one = 1;
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
			if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1) == 0) {
				int c;
				do
					c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
				while (c < 0 && errno == EINTR);
				err = errno;
				close(fd);
				fd = c;
				if (fd >= 0)
					break;
				continue;
			}
		} else if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
			break;
		}
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		pt_msg("%s: %s", spec, strerror(err));
		errno = err;
	}
	return fd;
}

/* Which of descriptors 0, 1 and 2 were closed when the command started
 * (pt_hold_std_fds). */
static bool std_closed[3];

void pt_hold_std_fds(void)
{
	static const int mode[3] = { O_RDONLY, O_WRONLY, O_WRONLY };
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		std_closed[fd] = true;
		/* open(2) gives the lowest free descriptor: fd itself, since
		 * those below it are open by now.  If /dev/null cannot be
		 * opened, fd stays closed (and '-' is still refused). */
		(void)open("/dev/null", mode[fd]);
	}
}

/* '-' for a standard descriptor that was closed at start: an error. */
static int std_closed_error(const char *name)
{
	pt_msg("%s: %s", name, strerror(EBADF));
	errno = EBADF;
	return -1;
}

int pt_open_input(const char *spec, char *name, size_t namelen, int64_t *size)
{
	int fd;
	*size = -1;
	if (!strcmp(spec, "-")) {
		set_name(name, namelen, "standard input");
		if (std_closed[STDIN_FILENO])
			return std_closed_error(name);
		fd = STDIN_FILENO;
	} else if (!strncmp(spec, "tcp:", 4)) {
		set_name(name, namelen, spec);
		return tcp_open(spec, true);
	} else {
		set_name(name, namelen, spec);
		fd = open(spec, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			pt_msg("%s: %s", spec, strerror(errno));
			return -1;
		}
	}
	grow_kernel_pipe(fd);
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		off_t pos = lseek(fd, 0, SEEK_CUR);
		*size = st.st_size - (pos > 0 ? pos : 0);
	}
	return fd;
}

int pt_open_output(const char *spec, bool append, char *name, size_t namelen)
{
	if (!strcmp(spec, "-")) {
		set_name(name, namelen, "standard output");
		if (std_closed[STDOUT_FILENO])
			return std_closed_error(name);
		grow_kernel_pipe(STDOUT_FILENO);
		return STDOUT_FILENO;
	}
	set_name(name, namelen, spec);
	if (!strncmp(spec, "tcp:", 4))
		return tcp_open(spec, false);
	int fd = open(spec, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0666);
	if (fd < 0)
		pt_msg("%s: %s", spec, strerror(errno));
	return fd;
}
