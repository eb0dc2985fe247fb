#include <errno.h>
#include <string.h>
#include "errors.h"
#include "kv.h"

static const struct { int err; const char *name; } names[] = {
	{ EPERM, "EPERM" }, { ENOENT, "ENOENT" }, { EIO, "EIO" }, { E2BIG, "E2BIG" },
	{ EBADF, "EBADF" }, { ENOMEM, "ENOMEM" }, { EACCES, "EACCES" }, { EBUSY, "EBUSY" },
	{ EEXIST, "EEXIST" }, { EXDEV, "EXDEV" }, { ENOTDIR, "ENOTDIR" }, { EISDIR, "EISDIR" },
	{ EINVAL, "EINVAL" }, { EMFILE, "EMFILE" }, { ENFILE, "ENFILE" }, { ETXTBSY, "ETXTBSY" },
	{ EFBIG, "EFBIG" }, { ENOSPC, "ENOSPC" }, { EROFS, "EROFS" }, { EMLINK, "EMLINK" },
	{ ENAMETOOLONG, "ENAMETOOLONG" }, { ENOSYS, "ENOSYS" }, { ENOTEMPTY, "ENOTEMPTY" },
	{ ELOOP, "ELOOP" }, { EAGAIN, "EAGAIN" }, { EDQUOT, "EDQUOT" }, { ENXIO, "ENXIO" },
};

const char *errno_name(int err) {
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].err == err) return names[i].name;
	return "EIO";
}

int reply_error(struct buffer *reply, int err, const char *what) {
	kv_put(reply, "error", errno_name(err));
	kv_putf(reply, "message", "%s: %s", what, strerror(err));
	return -1;
}
