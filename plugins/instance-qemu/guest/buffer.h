/* A growable byte buffer with a read offset (queued output, partial input). */
#ifndef CORRAL_BUFFER_H
#define CORRAL_BUFFER_H

#include <stddef.h>

struct buffer {
	unsigned char *data;
	size_t start, end, cap;
};

int buffer_append(struct buffer *b, const void *data, size_t len);
size_t buffer_length(const struct buffer *b);
const unsigned char *buffer_bytes(const struct buffer *b);
void buffer_consume(struct buffer *b, size_t len);
void buffer_clear(struct buffer *b);
void buffer_free(struct buffer *b);

#endif
