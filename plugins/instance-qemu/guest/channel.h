/*
 * One request from the daemon: an exec session, a file being read or written, a directory
 * being listed. Channels are numbered by the daemon; each stream has its own credit.
 */
#ifndef CORRAL_CHANNEL_H
#define CORRAL_CHANNEL_H

#include <dirent.h>
#include <stdint.h>
#include <sys/types.h>
#include "buffer.h"
#include "protocol.h"

enum channel_kind { CHANNEL_FREE = 0, CHANNEL_EXEC, CHANNEL_READ, CHANNEL_LIST, CHANNEL_WRITE };

struct channel {
	enum channel_kind kind;
	uint32_t id;
	/* What the agent sends: [0] STREAM_OUT, [1] STREAM_ERR; -1 once ended. */
	int out_fd[2];
	/* Bytes the daemon still accepts on each stream. */
	int64_t out_credit[2];
	/* Where the daemon's STREAM_IN goes (stdin, the file being written); -1 when none. */
	int in_fd;
	/* Input not written yet (bounded by the window the daemon respects). */
	struct buffer in_pending;
	int in_eof;
	/* Input consumed since the last credit given back. */
	uint32_t in_consumed;
	/* exec */
	pid_t pid;
	int pty;
	int exited;
	int status;
	/* When output last moved after the command exited (ms, monotonic). */
	long long quiet_since;
	/* list */
	DIR *dir;
	/* write: the content goes to `write_temp`, renamed to `write_final` once whole */
	char *write_temp;
	char *write_final;
};

extern struct channel channels[MAX_CHANNELS];

struct channel *channel_find(uint32_t id);
/* A free slot, or NULL when MAX_CHANNELS are open. */
struct channel *channel_open(uint32_t id, enum channel_kind kind);
/* Ends a channel: closes its descriptors and kills an exec's process group. */
void channel_close(struct channel *c);
void channels_reset(void);

/* Sends what an output stream has, within its credit; returns 1 if it moved bytes. */
int channel_pump_output(struct channel *c, int stream);
/* Writes pending input to in_fd and gives credit back. */
void channel_pump_input(struct channel *c);
void channel_give_credit(struct channel *c);
/* Sends EOF for an output stream and closes it. */
void channel_end_output(struct channel *c, int stream);

long long monotonic_ms(void);

#endif
