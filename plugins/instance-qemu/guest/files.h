/* Files for the daemon: stat, read as a stream, list, write, mkdir, symlinks, delete. */
#ifndef CORRAL_FILES_H
#define CORRAL_FILES_H

#include <stddef.h>
#include "buffer.h"
#include "channel.h"

/* Each fills `reply` (the result or error=ERRNO) and returns -1 on error. */
int files_stat(const unsigned char *payload, size_t len, struct buffer *reply);
int files_readlink(const unsigned char *payload, size_t len, struct buffer *reply);
int files_remove(const unsigned char *payload, size_t len, struct buffer *reply);
/* These keep the channel open: content (or entries) follows on STREAM_OUT. */
int files_read(struct channel *c, const unsigned char *payload, size_t len, struct buffer *reply);
int files_list(struct channel *c, const unsigned char *payload, size_t len, struct buffer *reply);
/*
 * A directory or a symlink is made at once (returns 0, reply filled); a file returns 1: its
 * content comes on STREAM_IN and the reply waits for its end.
 */
int files_write(struct channel *c, const unsigned char *payload, size_t len, struct buffer *reply);
/* Content for a file being written; on error the reply goes out and the channel closes. */
void files_write_data(struct channel *c, const unsigned char *data, size_t len);
void files_write_end(struct channel *c);
/* Sends the next directory entries within the stream's credit. */
int files_pump_list(struct channel *c);

#endif
