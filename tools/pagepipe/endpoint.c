/*
 * endpoint.c - turn the command's input and output names into descriptors.
 *
 *   "-"               standard input / standard output
 *   tcp:HOST:PORT     an output: connect to HOST (a name, an IPv4 address or
 *                     [an IPv6 address]) on PORT
 *   tcp:[HOST]:PORT   an input: listen on HOST (all addresses when empty)
 *                     and read the first connection accepted
 *   anything else     a file path
 *   -x CMD            (an output) a kernel pipe to 'sh -c CMD'
 *
 * Each function prints its own message on failure, so the caller only
 * decides what a failure means for the exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <spawn.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

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

/*
 * A PORT: decimal 1..65535 (0 too for a listener: the kernel picks one),
 * or a service name the system knows (/etc/services).  Checked here, since
 * getaddrinfo(3) takes any number and keeps its low 16 bits: port 99999
 * became 34463.  Returns the number, or -1.
 */
static long tcp_port(const char *port, bool listening)
{
	size_t digits = strspn(port, "0123456789");
	if (!port[digits]) {
		long v = 0;
		for (size_t k = 0; k < digits && v <= 65535; k++)
			v = v * 10 + (port[k] - '0');
		return v > 65535 || (v == 0 && !listening) ? -1 : v;
	}
	struct servent *se = getservbyname(port, "tcp");
	return se ? ntohs((uint16_t)se->s_port) : -1;
}

/* Split and check tcp:HOST:PORT into host and port; 0, or -1 with the
 * reason in err. */
static int tcp_spec(const char *spec, bool listening, char *host, size_t hostlen, char *port,
                    size_t portlen, char *err, size_t errlen)
{
	if (split_hostport(spec + 4, host, hostlen, port, portlen) != 0) {
		snprintf(err, errlen, "%s: expected tcp:HOST:PORT", spec);
		return -1;
	}
	if (!listening && !host[0]) {
		snprintf(err, errlen, "%s: an output needs a host", spec);
		return -1;
	}
	if (tcp_port(port, listening) < 0) {
		snprintf(err, errlen, "%s: invalid port '%s' (%s..65535, or a service name)", spec,
		         port, listening ? "0" : "1");
		return -1;
	}
	return 0;
}

int pt_check_endpoint(const char *spec, bool listening, char *err, size_t errlen)
{
	char host[256], port[32];
	if (strncmp(spec, "tcp:", 4))
		return 0;
	return tcp_spec(spec, listening, host, sizeof host, port, sizeof port, err, errlen);
}

/* A socket for a, bound and listening: the descriptor, or -1 with errno. */
static int tcp_bind(const struct addrinfo *a, bool dual_stack)
{
	int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
	if (fd < 0)
		return -1;
	int one = 1, zero = 0;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (dual_stack)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
	if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1) == 0)
		return fd;
	int err = errno;
	close(fd);
	errno = err;
	return -1;
}

/*
 * Listen on HOST:PORT and take the first connection.  With no HOST, "all
 * addresses" means IPv6 and IPv4 alike: an IPv6 socket that also takes
 * IPv4 (IPV6_V6ONLY off) is tried first, then IPv4 alone where IPv6 is not
 * available; getaddrinfo lists 0.0.0.0 first, which left [::1] clients
 * refused.  With PORT 0 the kernel chooses the port, which is printed,
 * since nobody could connect without it.
 */
static int tcp_listen(const char *spec, const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *res;
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc != 0) {
		pt_msg("%s: %s", spec, gai_strerror(rc));
		errno = EINVAL;
		return -1;
	}
	int fd = -1, err = EADDRNOTAVAIL;
	for (int pass = host[0] ? 1 : 0; pass < 2 && fd < 0; pass++)
		for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
			if (pass == 0 && a->ai_family != AF_INET6)
				continue;
			fd = tcp_bind(a, pass == 0);
			if (fd < 0)
				err = errno;
		}
	freeaddrinfo(res);
	if (fd < 0) {
		pt_msg("%s: %s", spec, strerror(err));
		errno = err;
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (tcp_port(port, true) == 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		pt_msg("listening on port %u", ntohs(ss.ss_family == AF_INET6
		                                         ? ((struct sockaddr_in6 *)&ss)->sin6_port
		                                         : ((struct sockaddr_in *)&ss)->sin_port));
	int c;
	do
		c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	while (c < 0 && errno == EINTR);
	err = errno;
	close(fd);
	if (c < 0) {
		pt_msg("%s: %s", spec, strerror(err));
		errno = err;
	}
	return c;
}

/* Connect to HOST:PORT, trying each of its addresses in turn. */
static int tcp_connect(const char *spec, const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		pt_msg("%s: %s", spec, gai_strerror(rc));
		errno = EINVAL;
		return -1;
	}
	int fd = -1, err = EADDRNOTAVAIL;
	for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
			err = errno;
			close(fd);
			fd = -1;
		} else if (fd < 0) {
			err = errno;
		}
	}
	freeaddrinfo(res);
	if (fd < 0) {
		pt_msg("%s: %s", spec, strerror(err));
		errno = err;
	}
	return fd;
}

static int tcp_open(const char *spec, bool listening)
{
	char host[256], port[32], err[512];
	if (tcp_spec(spec, listening, host, sizeof host, port, sizeof port, err, sizeof err)) {
		pt_msg("%s", err);
		errno = EINVAL;
		return -1;
	}
	return listening ? tcp_listen(spec, host, port) : tcp_connect(spec, host, port);
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

/*
 * The command runs as if started from the shell that started pagepipe: the
 * signals pagepipe ignores (SIGPIPE) or blocks for its signal thread
 * (SIGINT, SIGTERM) are reset, or `yes | head` inside the command would
 * print "Broken pipe" and a ^C would not reach it.  posix_spawn, not fork:
 * no copy of this process's memory, and safe beside running threads.
 */
int pt_open_command(const char *cmd, char *name, size_t namelen, pid_t *pid)
{
	snprintf(name, namelen, "command '%s'", cmd);
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		pt_msg("%s: %s", name, strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dflt;
	sigemptyset(&none);
	sigemptyset(&dflt);
	sigaddset(&dflt, SIGPIPE);
	sigaddset(&dflt, SIGINT);
	sigaddset(&dflt, SIGTERM);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[0], STDIN_FILENO); /* clears close-on-exec */
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dflt);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	char *argv[] = { "sh", "-c", (char *)cmd, NULL };
	int rc = posix_spawn(pid, "/bin/sh", &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(p[0]);
	if (rc != 0) {
		pt_msg("%s: cannot start /bin/sh: %s", name, strerror(rc));
		close(p[1]);
		return -1;
	}
	grow_kernel_pipe(p[1]);
	return p[1];
}
