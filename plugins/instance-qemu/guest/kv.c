#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kv.h"

/* Walks the entries; returns the next one's offset or `len` at the end. */
static size_t entry_end(const unsigned char *payload, size_t len, size_t at) {
	const unsigned char *nul = memchr(payload + at, 0, len - at);
	return nul ? (size_t)(nul - payload) : len;
}

int kv_valid(const unsigned char *payload, size_t len) {
	size_t at = 0;
	if (len && payload[len - 1] != 0) return 0;
	while (at < len) {
		size_t end = entry_end(payload, len, at);
		if (!memchr(payload + at, '=', end - at)) return 0;
		at = end + 1;
	}
	return 1;
}

size_t kv_each(const unsigned char *payload, size_t len, const char *key,
               void (*each)(const char *value, void *arg), void *arg) {
	size_t keylen = strlen(key), at = 0, found = 0;
	while (at < len) {
		size_t end = entry_end(payload, len, at);
		if (end - at > keylen && memcmp(payload + at, key, keylen) == 0 && payload[at + keylen] == '=') {
			if (each) each((const char *)payload + at + keylen + 1, arg);
			found++;
		}
		at = end + 1;
	}
	return found;
}

static void keep_first(const char *value, void *arg) {
	const char **first = arg;
	if (!*first) *first = value;
}

const char *kv_get(const unsigned char *payload, size_t len, const char *key) {
	const char *first = NULL;
	kv_each(payload, len, key, keep_first, &first);
	return first;
}

long long kv_number(const unsigned char *payload, size_t len, const char *key, long long fallback) {
	const char *value = kv_get(payload, len, key);
	char *end;
	long long n;
	if (!value || !*value) return fallback;
	n = strtoll(value, &end, 10);
	return *end ? fallback : n;
}

int kv_put(struct buffer *out, const char *key, const char *value) {
	if (buffer_append(out, key, strlen(key)) || buffer_append(out, "=", 1)) return -1;
	return buffer_append(out, value, strlen(value) + 1);
}

int kv_putf(struct buffer *out, const char *key, const char *format, ...) {
	char value[512];
	va_list ap;
	va_start(ap, format);
	vsnprintf(value, sizeof(value), format, ap);
	va_end(ap);
	return kv_put(out, key, value);
}
