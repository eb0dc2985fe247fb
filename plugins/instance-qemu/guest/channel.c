#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "channel.h"
#include "link.h"

struct channel channels[MAX_CHANNELS];

long long monotonic_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct channel *channel_find(uint32_t id) {
	for (int i = 0; i < MAX_CHANNELS; i++)
		if (channels[i].kind != CHANNEL_FREE && channels[i].id == id) return &channels[i];
	return NULL;
}

struct channel *channel_open(uint32_t id, enum channel_kind kind) {
	for (int i = 0; i < MAX_CHANNELS; i++) {
		struct channel *c = &channels[i];
		if (c->kind != CHANNEL_FREE) continue;
		memset(c, 0, sizeof(*c));
		c->kind = kind;
		c->id = id;
		c->out_fd[0] = c->out_fd[1] = c->in_fd = -1;
		c->out_credit[0] = c->out_credit[1] = STREAM_WINDOW;
		return c;
	}
	return NULL;
}

void channel_close(struct channel *c) {
	if (c->kind == CHANNEL_EXEC && !c->exited && c->pid > 0) {
		/* The command and everything it started (it leads its own session). */
		kill(-c->pid, SIGKILL);
		kill(c->pid, SIGKILL);
	}
	for (int s = 0; s < 2; s++)
		if (c->out_fd[s] >= 0) close(c->out_fd[s]);
	if (c->in_fd >= 0) close(c->in_fd);
	if (c->dir) closedir(c->dir);
	/* A write that did not complete leaves the old file as it was. */
	if (c->write_temp) unlink(c->write_temp);
	free(c->write_temp);
	free(c->write_final);
	buffer_free(&c->in_pending);
	memset(c, 0, sizeof(*c));
}

void channels_reset(void) {
	for (int i = 0; i < MAX_CHANNELS; i++)
		if (channels[i].kind != CHANNEL_FREE) channel_close(&channels[i]);
}

void channel_end_output(struct channel *c, int stream) {
	unsigned char id = (unsigned char)(STREAM_OUT + stream);
	if (c->out_fd[stream] < 0) return;
	close(c->out_fd[stream]);
	c->out_fd[stream] = -1;
	link_send(c->id, FRAME_EOF, &id, 1, NULL, 0);
}

int channel_pump_output(struct channel *c, int stream) {
	unsigned char chunk[MAX_CHUNK];
	unsigned char id = (unsigned char)(STREAM_OUT + stream);
	int64_t room = c->out_credit[stream];
	if (c->out_fd[stream] < 0 || room <= 0) return 0;
	ssize_t n = read(c->out_fd[stream], chunk, room < MAX_CHUNK ? (size_t)room : MAX_CHUNK);
	if (n > 0) {
		link_send(c->id, FRAME_DATA, &id, 1, chunk, (size_t)n);
		c->out_credit[stream] -= n;
		return 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
	/* 0: end of file; EIO: a pty whose other side is all closed. */
	channel_end_output(c, stream);
	return 1;
}

void channel_give_credit(struct channel *c) {
	unsigned char grant[5];
	if (!c->in_consumed) return;
	grant[0] = STREAM_IN;
	put_u32(grant + 1, c->in_consumed);
	link_send(c->id, FRAME_CREDIT, grant, sizeof(grant), NULL, 0);
	c->in_consumed = 0;
}

void channel_pump_input(struct channel *c) {
	while (c->in_fd >= 0 && buffer_length(&c->in_pending)) {
		ssize_t n = write(c->in_fd, buffer_bytes(&c->in_pending), buffer_length(&c->in_pending));
		if (n > 0) {
			buffer_consume(&c->in_pending, (size_t)n);
			c->in_consumed += (uint32_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
		/* The command closed its input: what is left is dropped (and still credited). */
		c->in_consumed += (uint32_t)buffer_length(&c->in_pending);
		buffer_clear(&c->in_pending);
		if (!c->pty) {
			close(c->in_fd);
			c->in_fd = -1;
		}
	}
	/* Credit back in batches, or at once when everything is written. */
	if (c->in_consumed >= STREAM_WINDOW / 4 || !buffer_length(&c->in_pending)) channel_give_credit(c);
	if (c->in_eof && !buffer_length(&c->in_pending) && c->in_fd >= 0 && !c->pty) {
		close(c->in_fd);
		c->in_fd = -1;
	}
}
