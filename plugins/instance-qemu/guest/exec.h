/* Commands started for the daemon: argv, env, cwd, uid/gid, with a pty or three pipes. */
#ifndef CORRAL_EXEC_H
#define CORRAL_EXEC_H

#include <stddef.h>
#include "buffer.h"
#include "channel.h"

/* Starts the command described by an OPEN payload; fills `reply` (pid= or error=). */
int exec_start(struct channel *c, const unsigned char *payload, size_t len, struct buffer *reply);
void exec_signal(struct channel *c, int signal);
void exec_resize(struct channel *c, unsigned cols, unsigned rows);
/* Reaps exited children and records their status on their channel. */
void exec_reap(void);
/* Sends EXIT for commands that ended and whose output is all sent; closes their channel. */
void exec_finish(struct channel *c);

#endif
