/*
 * The wire protocol between the daemon and this agent (docs/decisions/0048-vm-guest-agent.md).
 * Every frame: u32 payload length (big endian), u32 channel, u8 type, then the payload.
 */
#ifndef CORRAL_PROTOCOL_H
#define CORRAL_PROTOCOL_H

#include <stdint.h>

#define PROTOCOL_VERSION 1
#define HELLO_MAGIC "CORRALAG"
#define HELLO_MAGIC_LEN 8
/* magic + u16 version + u32 nonce */
#define HELLO_PAYLOAD_LEN (HELLO_MAGIC_LEN + 2 + 4)
#define FRAME_HEADER_LEN 9
#define MAX_PAYLOAD 65536
/* Data frames carry one stream byte then at most this much. */
#define MAX_CHUNK 32768
#define MAX_CHANNELS 64
/* Bytes a sender may have in flight per stream before the receiver grants more. */
#define STREAM_WINDOW (256 * 1024)

enum frame_type {
	FRAME_HELLO = 1,  /* ch 0: greeting (host first; the agent resets and answers with the same nonce) */
	FRAME_OPEN = 2,   /* host: start a request on a new channel (key=value payload) */
	FRAME_DATA = 3,   /* either way: u8 stream + bytes */
	FRAME_EOF = 4,    /* either way: u8 stream ended */
	FRAME_CREDIT = 5, /* either way: u8 stream + u32 bytes the sender may send more */
	FRAME_REPLY = 6,  /* agent: answer to OPEN (key=value: error=ERRNO or the result) */
	FRAME_EXIT = 7,   /* agent: exec ended, i32 exit status; the channel is closed */
	FRAME_SIGNAL = 8, /* host: u32 signal for the command */
	FRAME_RESIZE = 9, /* host: u16 cols + u16 rows */
	FRAME_CLOSE = 10, /* host: abandon the channel (kills an exec's process group) */
	FRAME_RESET = 11, /* agent, ch 0: a frame made no sense, every channel is gone: greet again */
};

enum stream_id {
	STREAM_IN = 0,   /* stdin, or the content of a file being written */
	STREAM_OUT = 1,  /* stdout (the terminal under a pty), file content, directory entries */
	STREAM_ERR = 2,  /* stderr */
};

static inline uint32_t get_u32(const unsigned char *p) {
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline void put_u32(unsigned char *p, uint32_t v) {
	p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static inline uint16_t get_u16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline void put_u16(unsigned char *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }

#endif
