#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "link.h"
#include "protocol.h"

struct link daemon_link = { .fd = -1, .hunting = 1 };

static void link_close(void) {
	if (daemon_link.fd >= 0) close(daemon_link.fd);
	daemon_link.fd = -1;
	daemon_link.up = 0;
}

static int open_socket(const char *path) {
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;
	if (strlen(path) >= sizeof(addr.sun_path)) return -1;
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) return -1;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

void link_poll_state(void) {
	if (daemon_link.fd < 0) {
		daemon_link.fd = daemon_link.socket_mode ? open_socket(daemon_link.path) : open(daemon_link.path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (daemon_link.fd < 0) return;
		daemon_link.hunting = 1;
		/* A port is up only once the host end is open (no POLLHUP); a connected socket is. */
		daemon_link.up = daemon_link.socket_mode;
	}
	if (!daemon_link.up) {
		struct pollfd p = { .fd = daemon_link.fd, .events = POLLIN };
		if (poll(&p, 1, 0) >= 0 && !(p.revents & (POLLHUP | POLLERR | POLLNVAL))) daemon_link.up = 1;
	}
}

void link_down(void) {
	buffer_clear(&daemon_link.in);
	buffer_clear(&daemon_link.out);
	daemon_link.hunting = 1;
	/* A port stays open (the daemon comes back to it); a socket is reconnected. */
	if (daemon_link.socket_mode) link_close();
	else daemon_link.up = 0;
}

int link_ready(void) {
	return daemon_link.up && !daemon_link.hunting && buffer_length(&daemon_link.out) < LINK_OUT_HIGH;
}

void link_send(uint32_t channel, uint8_t type, const void *head, size_t headlen, const void *body, size_t bodylen) {
	unsigned char header[FRAME_HEADER_LEN];
	put_u32(header, (uint32_t)(headlen + bodylen));
	put_u32(header + 4, channel);
	header[8] = type;
	buffer_append(&daemon_link.out, header, sizeof(header));
	if (headlen) buffer_append(&daemon_link.out, head, headlen);
	if (bodylen) buffer_append(&daemon_link.out, body, bodylen);
}

void link_flush(void) {
	while (daemon_link.up && buffer_length(&daemon_link.out)) {
		ssize_t n = write(daemon_link.fd, buffer_bytes(&daemon_link.out), buffer_length(&daemon_link.out));
		if (n > 0) {
			buffer_consume(&daemon_link.out, (size_t)n);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
		link_down();
		return;
	}
}

/* The greeting's fixed first bytes: header (length, channel 0, HELLO) then the magic. */
static void hello_pattern(unsigned char pattern[FRAME_HEADER_LEN + HELLO_MAGIC_LEN]) {
	put_u32(pattern, HELLO_PAYLOAD_LEN);
	put_u32(pattern + 4, 0);
	pattern[8] = FRAME_HELLO;
	memcpy(pattern + FRAME_HEADER_LEN, HELLO_MAGIC, HELLO_MAGIC_LEN);
}

/* Drops input up to the next greeting; keeps a tail that may be the start of one. */
static void hunt(void) {
	unsigned char pattern[FRAME_HEADER_LEN + HELLO_MAGIC_LEN];
	size_t len = buffer_length(&daemon_link.in);
	const unsigned char *bytes = buffer_bytes(&daemon_link.in);
	hello_pattern(pattern);
	for (size_t i = 0; i + sizeof(pattern) <= len; i++) {
		if (memcmp(bytes + i, pattern, sizeof(pattern)) == 0) {
			buffer_consume(&daemon_link.in, i);
			daemon_link.hunting = 0;
			return;
		}
	}
	if (len >= sizeof(pattern)) buffer_consume(&daemon_link.in, len - sizeof(pattern) + 1);
}

static void process_input(void) {
	for (;;) {
		if (daemon_link.hunting) {
			hunt();
			if (daemon_link.hunting) return;
		}
		size_t len = buffer_length(&daemon_link.in);
		const unsigned char *bytes = buffer_bytes(&daemon_link.in);
		if (len < FRAME_HEADER_LEN) return;
		uint32_t payload = get_u32(bytes);
		uint8_t type = bytes[8];
		if (payload > MAX_PAYLOAD || type < FRAME_HELLO || type > FRAME_RESET) {
			/* Out of step: say so, drop every channel and wait for the daemon to greet again. */
			dispatch_reset();
			link_send(0, FRAME_RESET, NULL, 0, NULL, 0);
			buffer_consume(&daemon_link.in, 1);
			daemon_link.hunting = 1;
			continue;
		}
		if (len < FRAME_HEADER_LEN + payload) return;
		dispatch_frame(get_u32(bytes + 4), type, bytes + FRAME_HEADER_LEN, payload);
		/* A greeting clears the buffers: only consume what is still this frame. */
		if (buffer_length(&daemon_link.in) >= FRAME_HEADER_LEN + payload) buffer_consume(&daemon_link.in, FRAME_HEADER_LEN + payload);
	}
}

void link_read(void) {
	unsigned char chunk[65536];
	for (int rounds = 0; rounds < 16 && daemon_link.up; rounds++) {
		ssize_t n = read(daemon_link.fd, chunk, sizeof(chunk));
		if (n > 0) {
			buffer_append(&daemon_link.in, chunk, (size_t)n);
			process_input();
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
		/* EOF: the daemon closed its end (a port reads 0 while the host side is closed). */
		link_down();
		return;
	}
}
