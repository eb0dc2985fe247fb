#include <stdlib.h>
#include <string.h>
#include "buffer.h"

size_t buffer_length(const struct buffer *b) { return b->end - b->start; }
const unsigned char *buffer_bytes(const struct buffer *b) { return b->data + b->start; }

int buffer_append(struct buffer *b, const void *data, size_t len) {
	if (b->end + len > b->cap) {
		/* Compact first: most of the time the consumed head makes room. */
		size_t used = buffer_length(b);
		if (b->start) {
			memmove(b->data, b->data + b->start, used);
			b->start = 0;
			b->end = used;
		}
		if (used + len > b->cap) {
			size_t cap = b->cap ? b->cap : 4096;
			while (cap < used + len) cap *= 2;
			unsigned char *grown = realloc(b->data, cap);
			if (!grown) return -1;
			b->data = grown;
			b->cap = cap;
		}
	}
	memcpy(b->data + b->end, data, len);
	b->end += len;
	return 0;
}

void buffer_consume(struct buffer *b, size_t len) {
	b->start += len;
	if (b->start >= b->end) b->start = b->end = 0;
}

void buffer_clear(struct buffer *b) { b->start = b->end = 0; }

void buffer_free(struct buffer *b) {
	free(b->data);
	b->data = NULL;
	b->start = b->end = b->cap = 0;
}
