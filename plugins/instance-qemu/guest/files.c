#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "errors.h"
#include "files.h"
#include "kv.h"
#include "link.h"

static const char *kind_of(mode_t mode) {
	if (S_ISREG(mode)) return "file";
	if (S_ISDIR(mode)) return "directory";
	if (S_ISLNK(mode)) return "symlink";
	return "other";
}

static void put_info(struct buffer *reply, const struct stat *st) {
	kv_put(reply, "kind", kind_of(st->st_mode));
	kv_putf(reply, "mode", "%u", (unsigned)(st->st_mode & 07777));
	kv_putf(reply, "uid", "%u", (unsigned)st->st_uid);
	kv_putf(reply, "gid", "%u", (unsigned)st->st_gid);
	kv_putf(reply, "mtime", "%lld", (long long)st->st_mtime);
}

static const char *path_of(const unsigned char *payload, size_t len, struct buffer *reply) {
	const char *path = kv_get(payload, len, "path");
	if (!path || path[0] != '/') {
		reply_error(reply, EINVAL, "the path must be absolute");
		return NULL;
	}
	return path;
}

int files_stat(const unsigned char *payload, size_t len, struct buffer *reply) {
	struct stat st;
	const char *path = path_of(payload, len, reply);
	if (!path) return -1;
	if (lstat(path, &st) < 0) return reply_error(reply, errno, path);
	put_info(reply, &st);
	return 0;
}

int files_readlink(const unsigned char *payload, size_t len, struct buffer *reply) {
	struct stat st;
	char target[PATH_MAX + 1];
	ssize_t n;
	const char *path = path_of(payload, len, reply);
	if (!path) return -1;
	if (lstat(path, &st) < 0 || (n = readlink(path, target, PATH_MAX)) < 0) return reply_error(reply, errno, path);
	target[n] = 0;
	put_info(reply, &st);
	kv_put(reply, "target", target);
	return 0;
}

int files_remove(const unsigned char *payload, size_t len, struct buffer *reply) {
	struct stat st;
	const char *path = path_of(payload, len, reply);
	if (!path) return -1;
	if (lstat(path, &st) < 0) return reply_error(reply, errno, path);
	if ((S_ISDIR(st.st_mode) ? rmdir(path) : unlink(path)) < 0) return reply_error(reply, errno, path);
	return 0;
}

int files_read(struct channel *c, const unsigned char *payload, size_t len, struct buffer *reply) {
	struct stat st;
	int fd;
	const char *path = path_of(payload, len, reply);
	if (!path) return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) return reply_error(reply, errno, path);
	{
		int failed = fstat(fd, &st) < 0 ? errno : !S_ISREG(st.st_mode) ? (S_ISDIR(st.st_mode) ? EISDIR : EINVAL) : 0;
		if (failed) {
			close(fd);
			return reply_error(reply, failed, path);
		}
	}
	put_info(reply, &st);
	kv_putf(reply, "size", "%lld", (long long)st.st_size);
	c->out_fd[0] = fd;
	return 0;
}

int files_list(struct channel *c, const unsigned char *payload, size_t len, struct buffer *reply) {
	struct stat st;
	const char *path = path_of(payload, len, reply);
	if (!path) return -1;
	if (lstat(path, &st) < 0) return reply_error(reply, errno, path);
	if (!S_ISDIR(st.st_mode)) return reply_error(reply, ENOTDIR, path);
	if (!(c->dir = opendir(path))) return reply_error(reply, errno, path);
	put_info(reply, &st);
	return 0;
}

int files_pump_list(struct channel *c) {
	unsigned char chunk[1 + MAX_CHUNK];
	size_t used = 1;
	struct dirent *entry;
	if (!c->dir || c->out_credit[0] < 512) return 0;
	chunk[0] = STREAM_OUT;
	/* Entries NUL-terminated; a chunk holds whole names only. */
	while (used + 257 < sizeof(chunk) && (int64_t)used + 257 < c->out_credit[0] && (entry = readdir(c->dir))) {
		size_t n = strlen(entry->d_name) + 1;
		if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, "..")) continue;
		memcpy(chunk + used, entry->d_name, n);
		used += n;
	}
	if (used > 1) {
		link_send(c->id, FRAME_DATA, chunk, used, NULL, 0);
		c->out_credit[0] -= (int64_t)(used - 1);
		return 1;
	}
	/* Nothing more: the listing ends, and with it the channel. */
	{
		unsigned char id = STREAM_OUT;
		link_send(c->id, FRAME_EOF, &id, 1, NULL, 0);
	}
	channel_close(c);
	return 1;
}

static void apply_owner_mode(int fd, const char *path, long long uid, long long gid, long long mode, int is_link) {
	if (uid >= 0 || gid >= 0) {
		if (is_link) lchown(path, (uid_t)uid, (gid_t)gid);
		else fchown(fd, (uid_t)uid, (gid_t)gid);
	}
	if (mode >= 0 && !is_link) fchmod(fd, (mode_t)(mode & 07777));
}

/*
 * A new file beside `path` that takes its place at the end: the old content stays whole if the
 * upload breaks off. It gets the owner and mode asked for, else the old file's, else root 0644.
 */
static int start_replacement(struct channel *c, const char *path, const struct stat *old, long long uid, long long gid,
                             long long mode, struct buffer *reply) {
	const char *slash = strrchr(path, '/');
	size_t dirlen = (size_t)(slash - path);
	char *temp = malloc(dirlen + 32);
	int fd;
	if (!temp) return reply_error(reply, ENOMEM, path);
	memcpy(temp, path, dirlen);
	strcpy(temp + dirlen, "/.corral-write-XXXXXX");
	fd = mkostemp(temp, O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		free(temp);
		return reply_error(reply, err, path);
	}
	fchown(fd, (uid_t)(uid >= 0 ? uid : old ? (long long)old->st_uid : 0), (gid_t)(gid >= 0 ? gid : old ? (long long)old->st_gid : 0));
	fchmod(fd, (mode_t)(mode >= 0 ? mode & 07777 : old ? old->st_mode & 07777 : 0644));
	c->in_fd = fd;
	c->write_temp = temp;
	c->write_final = strdup(path);
	if (!c->write_final) return reply_error(reply, ENOMEM, path);
	return 1;
}

int files_write(struct channel *c, const unsigned char *payload, size_t len, struct buffer *reply) {
	const char *path = path_of(payload, len, reply);
	const char *kind = kv_get(payload, len, "kind");
	long long uid = kv_number(payload, len, "uid", -1), gid = kv_number(payload, len, "gid", -1);
	long long mode = kv_number(payload, len, "mode", -1);
	int fd;
	if (!path) return -1;
	if (!kind || !strcmp(kind, "file")) {
		int append = kv_number(payload, len, "append", 0) == 1;
		struct stat old;
		int exists = lstat(path, &old) == 0;
		if (exists && S_ISDIR(old.st_mode)) return reply_error(reply, EISDIR, path);
		/* A replacement is written beside the file and renamed over it once whole; an append, or a
		   write through a symlink, goes to the file itself. */
		if (!append && !(exists && S_ISLNK(old.st_mode)))
			return start_replacement(c, path, exists ? &old : NULL, uid, gid, mode, reply);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | (append ? O_APPEND : O_TRUNC), mode >= 0 ? (mode_t)(mode & 07777) : 0644);
		if (fd < 0) return reply_error(reply, errno, path);
		apply_owner_mode(fd, path, uid, gid, mode, 0);
		c->in_fd = fd;
		return 1;
	}
	if (!strcmp(kind, "directory")) {
		struct stat st;
		if (mkdir(path, mode >= 0 ? (mode_t)(mode & 07777) : 0755) < 0 &&
		    !(errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
			return reply_error(reply, errno, path);
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			apply_owner_mode(fd, path, uid, gid, mode, 0);
			close(fd);
		}
		return 0;
	}
	if (!strcmp(kind, "symlink")) {
		const char *target = kv_get(payload, len, "target");
		struct stat st;
		if (!target || !*target) return reply_error(reply, EINVAL, "a symlink needs a target");
		if (symlink(target, path) < 0) {
			/* An existing symlink is replaced; anything else stays. */
			if (errno != EEXIST || lstat(path, &st) < 0 || !S_ISLNK(st.st_mode) || unlink(path) < 0 || symlink(target, path) < 0)
				return reply_error(reply, errno, path);
		}
		apply_owner_mode(-1, path, uid, gid, mode, 1);
		return 0;
	}
	return reply_error(reply, EINVAL, "unknown kind");
}

static void write_failed(struct channel *c, int err) {
	struct buffer reply = { 0 };
	reply_error(&reply, err, "write");
	link_send(c->id, FRAME_REPLY, buffer_bytes(&reply), buffer_length(&reply), NULL, 0);
	buffer_free(&reply);
	channel_close(c);
}

void files_write_data(struct channel *c, const unsigned char *data, size_t len) {
	while (len) {
		ssize_t n = write(c->in_fd, data, len);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) {
			write_failed(c, n < 0 ? errno : ENOSPC);
			return;
		}
		data += n;
		len -= (size_t)n;
		c->in_consumed += (uint32_t)n;
	}
	if (c->in_consumed >= STREAM_WINDOW / 4) channel_give_credit(c);
}

void files_write_end(struct channel *c) {
	int fd = c->in_fd;
	c->in_fd = -1;
	if (close(fd) < 0) {
		write_failed(c, errno);
		return;
	}
	if (c->write_temp) {
		if (rename(c->write_temp, c->write_final) < 0) {
			write_failed(c, errno);
			return;
		}
		free(c->write_temp);
		c->write_temp = NULL;
	}
	link_send(c->id, FRAME_REPLY, NULL, 0, NULL, 0);
	channel_close(c);
}
