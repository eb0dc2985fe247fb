/*
 * The one byte stream to the daemon: a virtio-serial port (in a VM) or a unix socket (`--connect`,
 * for tests on the host). Frames in, frames out, and the greeting that resynchronises both sides.
 */
#ifndef CORRAL_LINK_H
#define CORRAL_LINK_H

#include <stddef.h>
#include <stdint.h>
#include "buffer.h"

/* Past this much queued output, channels stop producing until the daemon reads. */
#define LINK_OUT_HIGH (1024 * 1024)

struct link {
	int fd;
	/* 1: `path` is a unix socket to connect to; 0: a port device to open. */
	int socket_mode;
	const char *path;
	/* The daemon is at the other end (the port is not hung up). */
	int up;
	/* Looking for a greeting in the input: nothing else is trusted until one is seen. */
	int hunting;
	struct buffer in, out;
};

extern struct link daemon_link;

/* Opens or connects when not open yet; checks whether a hung-up port has a daemon again. */
void link_poll_state(void);
/* The daemon went away: forget partial frames and queued output, wait for a new greeting. */
void link_down(void);
void link_send(uint32_t channel, uint8_t type, const void *head, size_t headlen, const void *body, size_t bodylen);
void link_read(void);
void link_flush(void);
/* Whether channels may produce output now. */
int link_ready(void);

/* Defined by the dispatcher: one whole frame from the daemon. */
void dispatch_frame(uint32_t channel, uint8_t type, const unsigned char *payload, size_t len);
/* Defined by the dispatcher: the frame stream made no sense; every channel ends. */
void dispatch_reset(void);

#endif
