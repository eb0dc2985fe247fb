/* Errors as the daemon sees them: an errno name and a message. */
#ifndef CORRAL_ERRORS_H
#define CORRAL_ERRORS_H

#include "buffer.h"

const char *errno_name(int err);
/* Puts error=NAME and message=... into a reply; returns -1 for the caller to pass on. */
int reply_error(struct buffer *reply, int err, const char *what);

#endif
