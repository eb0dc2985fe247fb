/*
 * Request and reply bodies: "key=value\0" entries; a key may repeat (arg, env, entry).
 */
#ifndef CORRAL_KV_H
#define CORRAL_KV_H

#include <stddef.h>
#include "buffer.h"

/* The first value of `key`, or NULL. Values are NUL-terminated inside the payload. */
const char *kv_get(const unsigned char *payload, size_t len, const char *key);
/* Calls `each` for every value of `key`, in order; returns how many there were. */
size_t kv_each(const unsigned char *payload, size_t len, const char *key,
               void (*each)(const char *value, void *arg), void *arg);
/* Whether every entry is NUL-terminated and has a '='. */
int kv_valid(const unsigned char *payload, size_t len);
/* A number in `key`, or `fallback` when absent or not a number. */
long long kv_number(const unsigned char *payload, size_t len, const char *key, long long fallback);

int kv_put(struct buffer *out, const char *key, const char *value);
int kv_putf(struct buffer *out, const char *key, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

#endif
