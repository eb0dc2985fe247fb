/* What each frame from the daemon does. */
#include <errno.h>
#include <string.h>
#include "channel.h"
#include "errors.h"
#include "exec.h"
#include "files.h"
#include "kv.h"
#include "link.h"
#include "protocol.h"
#include "state.h"

void dispatch_reset(void) {
	channels_reset();
}

static void greet(const unsigned char *payload, size_t len) {
	unsigned char hello[HELLO_PAYLOAD_LEN];
	if (len != HELLO_PAYLOAD_LEN || memcmp(payload, HELLO_MAGIC, HELLO_MAGIC_LEN)) return;
	/* A new daemon connection: whatever ran for the previous one ends, stale output is dropped. */
	channels_reset();
	buffer_clear(&daemon_link.out);
	memcpy(hello, HELLO_MAGIC, HELLO_MAGIC_LEN);
	put_u16(hello + HELLO_MAGIC_LEN, PROTOCOL_VERSION);
	memcpy(hello + HELLO_MAGIC_LEN + 2, payload + HELLO_MAGIC_LEN + 2, 4);
	link_send(0, FRAME_HELLO, hello, sizeof(hello), NULL, 0);
}

static void send_reply(uint32_t id, struct buffer *reply) {
	if (buffer_length(reply) > MAX_PAYLOAD) {
		buffer_clear(reply);
		reply_error(reply, E2BIG, "reply");
	}
	link_send(id, FRAME_REPLY, buffer_bytes(reply), buffer_length(reply), NULL, 0);
}

static void open_channel(uint32_t id, const unsigned char *payload, size_t len) {
	struct buffer reply = { 0 };
	const char *op = kv_valid(payload, len) ? kv_get(payload, len, "op") : NULL;
	struct channel *c = NULL;
	int result = -1;

	if (!id || channel_find(id)) reply_error(&reply, EBUSY, "channel in use");
	else if (!op) reply_error(&reply, EINVAL, "malformed request");
	else if (!strcmp(op, "stat")) result = files_stat(payload, len, &reply);
	else if (!strcmp(op, "readlink")) result = files_readlink(payload, len, &reply);
	else if (!strcmp(op, "remove")) result = files_remove(payload, len, &reply);
	else if (!strcmp(op, "state")) {
		state_report(&reply);
		result = 0;
	} else {
		enum channel_kind kind = !strcmp(op, "exec") ? CHANNEL_EXEC : !strcmp(op, "read") ? CHANNEL_READ
		                        : !strcmp(op, "list") ? CHANNEL_LIST : !strcmp(op, "write") ? CHANNEL_WRITE : CHANNEL_FREE;
		if (kind == CHANNEL_FREE) reply_error(&reply, ENOSYS, op);
		else if (!(c = channel_open(id, kind))) reply_error(&reply, EMFILE, "too many channels");
		else if (kind == CHANNEL_EXEC) result = exec_start(c, payload, len, &reply);
		else if (kind == CHANNEL_READ) result = files_read(c, payload, len, &reply);
		else if (kind == CHANNEL_LIST) result = files_list(c, payload, len, &reply);
		else result = files_write(c, payload, len, &reply);
		/* A file being written answers when its content has ended. */
		if (result == 1) {
			buffer_free(&reply);
			return;
		}
		if (c && (result < 0 || kind == CHANNEL_WRITE)) channel_close(c);
	}
	send_reply(id, &reply);
	buffer_free(&reply);
}

static void take_data(struct channel *c, const unsigned char *payload, size_t len) {
	if (!len || payload[0] != STREAM_IN) return;
	if (c->kind == CHANNEL_WRITE) {
		files_write_data(c, payload + 1, len - 1);
	} else if (c->kind == CHANNEL_EXEC && !c->in_eof) {
		/* More than the window is the daemon's mistake: dropped, not buffered. */
		if (buffer_length(&c->in_pending) + len - 1 <= 2 * STREAM_WINDOW) buffer_append(&c->in_pending, payload + 1, len - 1);
		channel_pump_input(c);
	}
}

static void take_eof(struct channel *c, const unsigned char *payload, size_t len) {
	if (len != 1 || payload[0] != STREAM_IN) return;
	if (c->kind == CHANNEL_WRITE) {
		files_write_end(c);
	} else if (c->kind == CHANNEL_EXEC && !c->in_eof) {
		c->in_eof = 1;
		/* A terminal is not closed on end of input: it gets ^D, as a user's would (after what is pending). */
		if (c->pty) buffer_append(&c->in_pending, "\x04", 1);
		channel_pump_input(c);
	}
}

void dispatch_frame(uint32_t id, uint8_t type, const unsigned char *payload, size_t len) {
	struct channel *c;
	if (type == FRAME_HELLO) {
		if (id == 0) greet(payload, len);
		return;
	}
	if (type == FRAME_OPEN) {
		open_channel(id, payload, len);
		return;
	}
	/* Frames for a channel that ended (or never was) are late, not wrong: ignored. */
	if (!(c = channel_find(id))) return;
	switch (type) {
	case FRAME_DATA:
		take_data(c, payload, len);
		break;
	case FRAME_EOF:
		take_eof(c, payload, len);
		break;
	case FRAME_CREDIT:
		if (len == 5 && (payload[0] == STREAM_OUT || payload[0] == STREAM_ERR)) c->out_credit[payload[0] - STREAM_OUT] += get_u32(payload + 1);
		break;
	case FRAME_SIGNAL:
		if (len == 4 && c->kind == CHANNEL_EXEC) exec_signal(c, (int)get_u32(payload));
		break;
	case FRAME_RESIZE:
		if (len == 4 && c->kind == CHANNEL_EXEC) exec_resize(c, get_u16(payload), get_u16(payload + 2));
		break;
	case FRAME_CLOSE:
		channel_close(c);
		break;
	default:
		break;
	}
}
