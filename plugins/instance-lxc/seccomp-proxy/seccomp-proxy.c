/*
 * corral-seccomp-proxy: answers the seccomp notifications liblxc forwards from containers whose
 * profile intercepts mknod/mknodat (lxc.seccomp.notify.proxy = unix:<socket>).
 *
 * Node cannot serve a SOCK_SEQPACKET socket nor receive file descriptors, so this small program
 * does it and the daemon supervises it. Usage: corral-seccomp-proxy <socket path>.
 *
 * liblxc's monitor connects once per container and sends, for each notification, one packet:
 * a header (struct proxy_msg below), the kernel's seccomp_notif, a seccomp_notif_resp to fill in
 * and the container's cookie; with it, as SCM_RIGHTS, the caller's /proc/<pid> directory, its
 * /proc/<pid>/mem and the seccomp notify fd. We answer with the header, notif and filled-in resp;
 * liblxc hands the resp to the kernel.
 *
 * mknod of the harmless character devices (and overlay whiteouts), and setxattr of the overlay
 * "opaque" mark (trusted.overlay.opaque=y) on a directory the caller owns, are done for the caller
 * from a child that joins the caller's mount namespace and root, with the caller's fsuid/fsgid, so
 * that it can never reach a file the caller could not. sched_setscheduler from the container's
 * root is done from a child in the caller's pid namespace (so the target pid is the caller's); a
 * mount of a file system type the container's policy allows is done from a child in the caller's
 * mount namespace, root and cwd, its block device opened as the caller and from the caller's device
 * cgroup; a cgroup device program is loaded for the caller (its fd added to the caller's table) and
 * attached to or detached from a cgroup of the caller's container. Everything else goes back to the
 * kernel (SECCOMP_USER_NOTIF_FLAG_CONTINUE), which decides as it would have without interception.
 *
 * Usage: corral-seccomp-proxy <socket path> <lxcpath>. The cookie liblxc sends is the container's
 * name; its policy (the file systems it may mount, whether they are idmapped, whether device programs
 * are served) is <lxcpath>/<name>/seccomp.intercept.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 1024
#define COOKIE_MAX 64
#define CHILD_TIMEOUT_MS 2000
/* A mount reads the file system's superblock (and may replay a journal): it gets longer. */
#define MOUNT_TIMEOUT_MS 10000

struct proxy_msg {
	uint64_t reserved;
	int32_t monitor_pid;
	int32_t init_pid;
	struct seccomp_notif_sizes sizes;
	uint64_t cookie_len;
};

struct packet {
	struct proxy_msg msg;
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	char cookie[COOKIE_MAX + 1];
};

#define PACKET_MIN (sizeof(struct proxy_msg) + sizeof(struct seccomp_notif) + sizeof(struct seccomp_notif_resp))

static struct seccomp_notif_sizes kernel_sizes;
/* Where each container's policy file is (argv[2]). */
static const char *lxcpath;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The devices an unprivileged container may create: those every system has and none can harm. */
static int device_allowed(mode_t mode, unsigned int major, unsigned int minor)
{
	static const unsigned int chars[][2] = {
		{ 0, 0 } /* overlay whiteout */, { 1, 3 } /* null */, { 1, 5 } /* zero */, { 1, 7 } /* full */,
		{ 1, 8 } /* random */, { 1, 9 } /* urandom */, { 5, 0 } /* tty */, { 5, 1 } /* console */,
	};
	if ((mode & S_IFMT) != S_IFCHR)
		return 0;
	for (size_t i = 0; i < sizeof(chars) / sizeof(chars[0]); i++)
		if (chars[i][0] == major && chars[i][1] == minor)
			return 1;
	return 0;
}

/*
 * A non-root fsuid clears the file system capabilities from the effective set, CAP_MKNOD among
 * them: take back CAP_MKNOD (it is still permitted), so that DAC stays the caller's; and the DAC
 * overrides only when the caller holds CAP_DAC_OVERRIDE in its own namespace and the directory
 * written to belongs to that namespace (as the kernel's capable_wrt_inode_uidgid()).
 */
static int set_caps(int dac)
{
	struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	if (syscall(__NR_capget, &head, data) < 0)
		return -1;
	data[CAP_TO_INDEX(CAP_MKNOD)].effective |= CAP_TO_MASK(CAP_MKNOD);
	const int overrides[] = { CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH };
	for (size_t i = 0; i < 2; i++) {
		if (dac)
			data[CAP_TO_INDEX(overrides[i])].effective |= CAP_TO_MASK(overrides[i]);
		else
			data[CAP_TO_INDEX(overrides[i])].effective &= ~CAP_TO_MASK(overrides[i]);
	}
	return (int)syscall(__NR_capset, &head, data);
}

#define MAX_RANGES 64

/* One line of a user namespace's uid_map or gid_map. */
struct id_range {
	unsigned long inside, outside, count;
};

struct id_map {
	struct id_range r[MAX_RANGES];
	int n;
};

/* A small file of the caller's /proc directory, NUL-terminated. */
static int read_proc_file(int proc_fd, const char *file, char *buf, size_t size)
{
	int fd = openat(proc_fd, file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	return 0;
}

static int read_map(int proc_fd, const char *file, struct id_map *map)
{
	char buf[8192];
	map->n = 0;
	int err = read_proc_file(proc_fd, file, buf, sizeof(buf));
	if (err)
		return err;
	for (char *line = buf; line && *line && map->n < MAX_RANGES;) {
		struct id_range *r = &map->r[map->n];
		if (sscanf(line, "%lu %lu %lu", &r->inside, &r->outside, &r->count) == 3)
			map->n++;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return 0;
}

/* Whether a host id has a name in the namespace. */
static int mapped(const struct id_map *map, unsigned long host)
{
	for (int i = 0; i < map->n; i++)
		if (host >= map->r[i].outside && host - map->r[i].outside < map->r[i].count)
			return 1;
	return 0;
}

/* The host id of the namespace's id 0, or -1. */
static unsigned long host_of_root(const struct id_map *map)
{
	for (int i = 0; i < map->n; i++)
		if (map->r[i].inside == 0 && map->r[i].count > 0)
			return map->r[i].outside;
	return (unsigned long)-1;
}

/* The kernel takes mknod's dev as a 32-bit value in the new encoding (new_decode_dev). */
static void decode_dev(uint64_t arg, unsigned int *major, unsigned int *minor)
{
	uint32_t dev = (uint32_t)arg;
	*major = (dev & 0xfff00) >> 8;
	*minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
}

/* A NUL-terminated string from the caller's memory, read page by page (a page may be unmapped). */
static int read_string(int mem_fd, uint64_t addr, char *buf, size_t size)
{
	size_t have = 0;
	while (have < size - 1) {
		size_t page_left = 4096 - ((addr + have) & 4095);
		size_t want = size - 1 - have < page_left ? size - 1 - have : page_left;
		ssize_t got = pread(mem_fd, buf + have, want, (off_t)(addr + have));
		if (got <= 0)
			return -EFAULT;
		if (memchr(buf + have, '\0', (size_t)got))
			return 0;
		have += (size_t)got;
	}
	return -ENAMETOOLONG;
}

/* fsuid/fsgid (fourth field of Uid:/Gid:, host ids as seen from here) and umask of the caller. */
static int caller_ids(int proc_fd, uid_t *fsuid, gid_t *fsgid, mode_t *umask_out, int *dac_override)
{
	char buf[4096];
	int err = read_proc_file(proc_fd, "status", buf, sizeof(buf));
	if (err)
		return err;
	unsigned int a, b, c, d;
	char *line = strstr(buf, "\nUid:");
	if (!line || sscanf(line + 5, "%u %u %u %u", &a, &b, &c, &d) != 4)
		return -EIO;
	*fsuid = d;
	line = strstr(buf, "\nGid:");
	if (!line || sscanf(line + 5, "%u %u %u %u", &a, &b, &c, &d) != 4)
		return -EIO;
	*fsgid = d;
	*umask_out = 022;
	line = strstr(buf, "\nUmask:");
	if (line && sscanf(line + 7, "%o", &a) == 1)
		*umask_out = a & 0777;
	unsigned long long caps = 0;
	line = strstr(buf, "\nCapEff:");
	*dac_override = line && sscanf(line + 8, "%llx", &caps) == 1 && (caps >> CAP_DAC_OVERRIDE) & 1;
	return 0;
}

enum action { MAKE_NODE, MARK_OPAQUE };

struct request {
	enum action action;
	int dirfd;
	const char *path;
	mode_t mode;
	dev_t dev;
	int xattr_flags;
};

/* In the child, as the caller: the overlay "opaque" mark on a directory the caller owns (or ns root). */
static int mark_opaque(const struct request *r, uid_t fsuid, unsigned long root)
{
	int fd = open(r->path[0] == '/' ? r->path + 1 : r->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	struct stat st;
	int err = 0;
	if (fstat(fd, &st) < 0)
		err = errno;
	else if (st.st_uid != fsuid && (unsigned long)fsuid != root)
		err = EPERM;
	else if (fsetxattr(fd, "trusted.overlay.opaque", "y", 1, r->xattr_flags) < 0)
		err = errno;
	close(fd);
	return err;
}

/*
 * In the child, as the caller: the node, in its directory opened first so that the DAC override
 * the caller may hold applies only to a directory of its own namespace.
 */
static int make_node(const struct request *r, mode_t umask_caller, int dac, const struct id_map *uids, const struct id_map *gids)
{
	char dir[4096];
	const char *path = r->path[0] == '/' ? r->path + 1 : r->path;
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	if (*name == '\0')
		return EEXIST;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
	int dfd = open(dir[0] ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno;
	struct stat st;
	int err = 0;
	if (fstat(dfd, &st) < 0)
		err = errno;
	else if (dac && !(mapped(uids, st.st_uid) && mapped(gids, st.st_gid)) && set_caps(0) < 0)
		err = EPERM;
	else if (mknodat(dfd, name, (r->mode & ~(S_IFMT | umask_caller)) | (r->mode & S_IFMT), r->dev) < 0)
		err = errno;
	close(dfd);
	return err;
}

static int in_child(int (*fn)(void *), void *arg, int timeout_ms);
static int keep_only_answer(int *keep);

/* What act_as_caller's child needs: the caller's mount namespace, root and base, ids and request. */
struct caller_act {
	int mnt_fd, root_fd, base_fd;
	uid_t fsuid;
	gid_t fsgid;
	mode_t umask_caller;
	int dac;
	unsigned long root;
	const struct id_map *uids, *gids;
	const struct request *r;
};

/* In the child: into the caller's mount namespace and root, then act with its fs ids; a positive errno. */
static int caller_act_child(void *arg)
{
	const struct caller_act *a = arg;
	if (setns(a->mnt_fd, CLONE_NEWNS) < 0 || fchdir(a->root_fd) < 0 || chroot(".") < 0 || fchdir(a->base_fd) < 0)
		return EPERM;
	/* Nothing of the host stays open while the caller's path is resolved: only the answer pipe. */
	if (keep_only_answer(NULL) < 0)
		return EPERM;
	setfsgid(a->fsgid);
	setfsuid(a->fsuid);
	if ((uid_t)setfsuid((uid_t)-1) != a->fsuid || (gid_t)setfsgid((gid_t)-1) != a->fsgid || set_caps(a->dac && a->r->action == MAKE_NODE) < 0)
		return EPERM;
	if (a->r->action == MARK_OPAQUE)
		return mark_opaque(a->r, a->fsuid, a->root);
	return make_node(a->r, a->umask_caller, a->dac, a->uids, a->gids);
}

/*
 * Do what the caller asked as the caller would have: in a child that joins the caller's mount
 * namespace, takes its root (and cwd or dirfd for relative paths) and the caller's fsuid/fsgid.
 * Returns 0 or a negative errno.
 */
static int act_as_caller(int proc_fd, int notify_fd, uint64_t id, const struct request *r)
{
	const char *path = r->path;
	int dirfd = r->dirfd;
	uid_t fsuid = (uid_t)-1;
	gid_t fsgid = (gid_t)-1;
	mode_t umask_caller = 022;
	int dac = 0;
	static struct id_map uids, gids;
	int ret = caller_ids(proc_fd, &fsuid, &fsgid, &umask_caller, &dac);
	if (ret < 0 || (ret = read_map(proc_fd, "uid_map", &uids)) < 0 || (ret = read_map(proc_fd, "gid_map", &gids)) < 0)
		return ret;
	unsigned long root = host_of_root(&uids);
	char where[32];
	if (path[0] == '/')
		snprintf(where, sizeof(where), "root");
	else if (dirfd == AT_FDCWD)
		snprintf(where, sizeof(where), "cwd");
	else
		snprintf(where, sizeof(where), "fd/%d", dirfd);
	int mnt_fd = openat(proc_fd, "ns/mnt", O_RDONLY | O_CLOEXEC);
	int root_fd = openat(proc_fd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int base_fd = mnt_fd < 0 || root_fd < 0 ? -1 : openat(proc_fd, where, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mnt_fd < 0 || root_fd < 0) {
		ret = -EPERM;
		goto out;
	}
	if (base_fd < 0) {
		/* As the kernel answers for a dirfd that is no directory, or no open file. */
		ret = dirfd == AT_FDCWD || path[0] == '/' ? -EPERM : errno == ENOTDIR ? -ENOTDIR : -EBADF;
		goto out;
	}
	/* The caller may have gone (and its pid been reused) while we opened its files. */
	if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0) {
		ret = -ENOENT;
		goto out;
	}
	struct caller_act act = {
		.mnt_fd = mnt_fd, .root_fd = root_fd, .base_fd = base_fd, .fsuid = fsuid, .fsgid = fsgid,
		.umask_caller = umask_caller, .dac = dac, .root = root, .uids = &uids, .gids = &gids, .r = r,
	};
	ret = in_child(caller_act_child, &act, CHILD_TIMEOUT_MS);
out:
	if (mnt_fd >= 0)
		close(mnt_fd);
	if (root_fd >= 0)
		close(root_fd);
	if (base_fd >= 0)
		close(base_fd);
	return ret;
}

/* handle()'s answer for "let the kernel run the call as it would have" (not ours to serve). */
#define CONTINUE 1

/* The answer pipe of a child run by in_child(). */
static int child_out = -1;

/*
 * In a child, once its own files are open: nothing of the host stays open but the answer pipe (as
 * fd 3) and, when keep is given and open, that one (a namespace, as fd 4).
 */
static int keep_only_answer(int *keep)
{
	int kept = keep && *keep >= 0 ? fcntl(*keep, F_DUPFD_CLOEXEC, 10) : -1;
	if ((keep && *keep >= 0 && kept < 0) || dup2(child_out, 3) != 3)
		return -1;
	child_out = 3;
	if (kept >= 0) {
		if (dup2(kept, 4) != 4)
			return -1;
		*keep = 4;
	}
	return (int)syscall(__NR_close_range, kept >= 0 ? 5U : 4U, ~0U, 0);
}

/*
 * Runs fn(arg) in a child (whatever namespaces, root, ids or cgroup it takes never touch the
 * proxy) and returns 0 or the negative errno fn answered, EPERM if it did not answer in time.
 */
static int in_child(int (*fn)(void *), void *arg, int timeout_ms)
{
	int status_pipe[2];
	if (pipe2(status_pipe, O_CLOEXEC) < 0)
		return -errno;
	pid_t child = fork();
	if (child < 0) {
		int err = errno;
		close(status_pipe[0]);
		close(status_pipe[1]);
		return -err;
	}
	if (child == 0) {
		close(status_pipe[0]);
		child_out = status_pipe[1];
		int err = fn(arg);
		if (write(child_out, &err, sizeof(err)) != sizeof(err))
			_exit(1);
		_exit(0);
	}
	close(status_pipe[1]);
	struct pollfd pfd = { .fd = status_pipe[0], .events = POLLIN };
	int err = EPERM;
	if (poll(&pfd, 1, timeout_ms) == 1 && read(status_pipe[0], &err, sizeof(err)) != sizeof(err))
		err = EPERM;
	close(status_pipe[0]);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return -err;
}

/* Whether the caller shares our user namespace (a privileged container: the kernel decides alone). */
static int in_host_userns(int proc_fd)
{
	struct stat mine, theirs;
	if (stat("/proc/self/ns/user", &mine) < 0 || fstatat(proc_fd, "ns/user", &theirs, 0) < 0)
		return 1;
	return mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino;
}

/* Where the numbers of the status line "<name>:" start, or NULL. */
static const char *status_line(const char *status, const char *name)
{
	char key[32];
	snprintf(key, sizeof(key), "\n%s:", name);
	const char *p = strstr(status, key);
	return p ? p + strlen(key) : NULL;
}

/* A field of the caller's status file: the n-th number (from 0) after "\n<name>:". */
static int status_field(const char *status, const char *name, int n, long *out)
{
	const char *p = status_line(status, name);
	if (!p)
		return -1;
	for (int i = 0;; i++) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			return -1;
		if (i == n) {
			*out = v;
			return 0;
		}
		p = end;
	}
}

/* The last number of a status line (NSpid: the caller's pid in its own pid namespace). */
static int status_last(const char *status, const char *name, long *out)
{
	const char *p = status_line(status, name);
	if (!p)
		return -1;
	int found = 0;
	for (;;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		*out = v;
		found = 1;
		p = end;
	}
	return found ? 0 : -1;
}

/* Effective host uid and gid of the caller, and whether they are its namespace's root. */
static int caller_euid(int proc_fd, long *euid, long *egid, int *ns_root, char *status, size_t size)
{
	static struct id_map uids, gids;
	if (read_proc_file(proc_fd, "status", status, size) < 0 || status_field(status, "Uid", 1, euid) < 0 ||
	    status_field(status, "Gid", 1, egid) < 0 || read_map(proc_fd, "uid_map", &uids) < 0 || read_map(proc_fd, "gid_map", &gids) < 0)
		return -1;
	*ns_root = (unsigned long)*euid == host_of_root(&uids) && (unsigned long)*egid == host_of_root(&gids);
	return 0;
}

struct sched_request {
	int pidns_fd;
	pid_t target;
	int policy;
	struct sched_param param;
};

/* The target's pid means what it meant to the caller only in the caller's pid namespace: a child of ours there makes the call. */
static int sched_in_child(void *arg)
{
	const struct sched_request *r = arg;
	if (setns(r->pidns_fd, CLONE_NEWPID) < 0 || keep_only_answer(NULL) < 0)
		return EPERM;
	int out[2];
	if (pipe(out) < 0)
		return EPERM;
	pid_t member = fork();
	if (member < 0)
		return EPERM;
	if (member == 0) {
		int err = syscall(__NR_sched_setscheduler, r->target, r->policy, &r->param) < 0 ? errno : 0;
		_exit(write(out[1], &err, sizeof(err)) == sizeof(err) ? 0 : 1);
	}
	close(out[1]);
	int err = EPERM;
	if (read(out[0], &err, sizeof(err)) != sizeof(err))
		err = EPERM;
	waitpid(member, NULL, 0);
	return err;
}

/*
 * sched_setscheduler from the root of an unprivileged container, as the reference: the kernel
 * wants CAP_SYS_NICE of the host for a realtime policy. Any other caller gets the kernel's answer.
 */
static int handle_sched(const struct seccomp_notif *req, int proc_fd, int mem_fd, int notify_fd)
{
	const struct seccomp_data *d = &req->data;
	char status[4096];
	long euid, egid, nspid;
	int ns_root;
	if (in_host_userns(proc_fd) || caller_euid(proc_fd, &euid, &egid, &ns_root, status, sizeof(status)) < 0 || !ns_root)
		return CONTINUE;
	struct sched_request r = { .target = (pid_t)(int32_t)d->args[0], .policy = (int)d->args[1] };
	if (r.target < 0 || r.policy < 0 || d->args[2] == 0)
		return CONTINUE;
	if (pread(mem_fd, &r.param, sizeof(r.param), (off_t)d->args[2]) != (ssize_t)sizeof(r.param))
		return -EFAULT;
	/* 0 is the calling thread: named by its id in its own namespace, like any other target. */
	if (r.target == 0) {
		if (status_last(status, "NSpid", &nspid) < 0)
			return -ESRCH;
		r.target = (pid_t)nspid;
	}
	r.pidns_fd = openat(proc_fd, "ns/pid", O_RDONLY | O_CLOEXEC);
	if (r.pidns_fd < 0)
		return -EPERM;
	int ret = -ENOENT;
	/* The caller may have gone (and its pid been reused) while we read its files. */
	if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) == 0)
		ret = in_child(sched_in_child, &r, CHILD_TIMEOUT_MS);
	close(r.pidns_fd);
	return ret;
}

#define POLICY_MAX 4096

/* The value of a `key=value` line of a policy, or NULL. */
static const char *policy_value(const char *policy, const char *key)
{
	size_t len = strlen(key);
	for (const char *line = policy; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (!strncmp(line, key, len) && line[len] == '=')
			return line + len + 1;
	return NULL;
}

/*
 * Whether the container (the cookie liblxc sends: its name) may mount this file system type, and
 * whether the mount is to be idmapped to the container (mount.shift).
 */
static int mount_allowed(const char *cookie, const char *fstype, int *shift)
{
	*shift = 0;
	if (!*cookie || strchr(cookie, '/') || !strcmp(cookie, ".") || !strcmp(cookie, "..") || !*fstype || strchr(fstype, ','))
		return 0;
	char file[4096], policy[POLICY_MAX];
	snprintf(file, sizeof(file), "%s/%s/seccomp.intercept", lxcpath, cookie);
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, policy, sizeof(policy) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	policy[n] = '\0';
	const char *shift_value = policy_value(policy, "mount.shift");
	*shift = shift_value && *shift_value == '1';
	const char *line = policy_value(policy, "mount.allowed");
	if (!line)
		return 0;
	size_t len = strlen(fstype);
	for (const char *p = line; *p && *p != '\n';) {
		const char *end = p + strcspn(p, ",\n");
		if ((size_t)(end - p) == len && !strncmp(p, fstype, len))
			return 1;
		p = *end == ',' ? end + 1 : end;
	}
	return 0;
}

/*
 * The cgroup.procs file of the caller's device cgroup (v1 devices controller, or the unified
 * hierarchy where device rules are bpf programs), so that the child opens devices under the
 * container's rules.
 */
static int device_cgroup(int proc_fd, char *out, size_t size)
{
	char buf[4096];
	if (read_proc_file(proc_fd, "cgroup", buf, sizeof(buf)) < 0)
		return -1;
	const char *v2 = NULL;
	for (char *line = buf; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *controllers = strchr(line, ':');
		char *where = controllers ? strchr(controllers + 1, ':') : NULL;
		if (where) {
			*where++ = '\0';
			controllers++;
			for (char *c = strtok(controllers, ","); c; c = strtok(NULL, ","))
				if (!strcmp(c, "devices"))
					return snprintf(out, size, "/sys/fs/cgroup/devices%s/cgroup.procs", where) >= (int)size ? -1 : 0;
			if (!*controllers)
				v2 = where;
		}
		line = next;
	}
	if (!v2 || access("/sys/fs/cgroup/cgroup.controllers", F_OK) < 0)
		return -1;
	return snprintf(out, size, "/sys/fs/cgroup%s/cgroup.procs", v2) >= (int)size ? -1 : 0;
}

struct mount_request {
	int mnt_fd, root_fd, cwd_fd;
	/* The caller's user namespace when the mount is to be idmapped to it, or -1. */
	int userns_fd;
	char cgroup_procs[4096];
	const char *source, *target, *fstype, *data;
	unsigned long flags;
	uid_t fsuid;
	gid_t fsgid;
};

/*
 * mount.shift: the new mount replaced by an idmapped copy of itself, so that the file system's ids
 * are seen through the container's map (its root owns what root owns on disk). Undone (the mount
 * taken away) when a step fails.
 */
static int shift_mount(const char *target, int userns_fd)
{
	int err = 0;
	int tree = (int)syscall(__NR_open_tree, AT_FDCWD, target, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns_fd };
	if (tree < 0 || syscall(__NR_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		err = errno;
	/* The plain mount goes either way: the idmapped copy takes its place, or nothing does. */
	if (umount2(target, MNT_DETACH) < 0 && !err)
		err = errno;
	if (!err && syscall(__NR_move_mount, tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		err = errno;
	if (tree >= 0)
		close(tree);
	return err;
}

static int mount_in_child(void *arg)
{
	const struct mount_request *r = arg;
	int userns_fd = r->userns_fd;
	int fd = open(r->cgroup_procs, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0", 1) != 1)
		return EPERM;
	close(fd);
	if (setns(r->mnt_fd, CLONE_NEWNS) < 0 || fchdir(r->root_fd) < 0 || chroot(".") < 0 || fchdir(r->cwd_fd) < 0 || keep_only_answer(&userns_fd) < 0)
		return EPERM;
	/* Paths are looked up with the caller's permissions (a non-root fsuid drops the DAC overrides). */
	setfsgid(r->fsgid);
	setfsuid(r->fsuid);
	if ((uid_t)setfsuid((uid_t)-1) != r->fsuid || (gid_t)setfsgid((gid_t)-1) != r->fsgid)
		return EPERM;
	struct stat st;
	if (r->source && stat(r->source, &st) == 0 && S_ISBLK(st.st_mode)) {
		/* A device the caller itself could open for this mount, and nothing more. */
		int dev = open(r->source, ((r->flags & MS_RDONLY) ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (dev < 0)
			return errno;
		close(dev);
	}
	/* Device nodes on the new file system stay inert, as on any mount made inside a user namespace. */
	if (mount(r->source, r->target, r->fstype, r->flags | MS_NODEV, r->data) < 0)
		return errno;
	return userns_fd >= 0 ? shift_mount(r->target, userns_fd) : 0;
}

/* hugetlbfs belongs to the caller (host ids, the file system being the host's): uid=/gid= added, or given ones mapped. */
static int hugetlbfs_owner(int proc_fd, long euid, long egid, char *data, size_t size)
{
	static struct id_map uids, gids;
	if (read_map(proc_fd, "uid_map", &uids) < 0 || read_map(proc_fd, "gid_map", &gids) < 0)
		return -1;
	char out[4096] = "", copy[4096];
	int have_uid = 0, have_gid = 0;
	snprintf(copy, sizeof(copy), "%s", data);
	for (char *opt = strtok(copy, ","); opt; opt = strtok(NULL, ",")) {
		char piece[64];
		const char *add = opt;
		int is_uid = !strncmp(opt, "uid=", 4), is_gid = !strncmp(opt, "gid=", 4);
		if (is_uid || is_gid) {
			char *end;
			unsigned long id = strtoul(opt + 4, &end, 10);
			const struct id_map *map = is_uid ? &uids : &gids;
			unsigned long host = (unsigned long)-1;
			for (int i = 0; *end == '\0' && i < map->n; i++)
				if (id >= map->r[i].inside && id - map->r[i].inside < map->r[i].count)
					host = map->r[i].outside + (id - map->r[i].inside);
			if (host == (unsigned long)-1)
				return -EINVAL;
			snprintf(piece, sizeof(piece), "%cid=%lu", is_uid ? 'u' : 'g', host);
			add = piece;
			have_uid |= is_uid, have_gid |= is_gid;
		}
		if (strlen(out) + strlen(add) + 2 >= sizeof(out))
			return -EINVAL;
		if (*out)
			strcat(out, ",");
		strcat(out, add);
	}
	size_t n = strlen(out);
	if (!have_uid)
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%suid=%ld", n ? "," : "", euid);
	if (!have_gid && n < sizeof(out))
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%sgid=%ld", n ? "," : "", egid);
	if (n >= sizeof(out) || n >= size)
		return -EINVAL;
	memcpy(data, out, n + 1);
	return 0;
}

/*
 * A mount of a new file system (the profile sends no bind, move, remount or propagation change)
 * whose type the container's policy allows: made for the caller in its own mount namespace, with
 * its root and cwd. A type not allowed goes on to the kernel (EPERM in a user namespace).
 */
static int handle_mount(const struct packet *p, int proc_fd, int mem_fd, int notify_fd)
{
	const struct seccomp_data *d = &p->req.data;
	char source[4096], target[4096], fstype[256], data[4096] = "", status[4096];
	if (in_host_userns(proc_fd) || d->args[2] == 0 || read_string(mem_fd, d->args[2], fstype, sizeof(fstype)) < 0)
		return CONTINUE;
	int shift;
	if (!mount_allowed(p->cookie, fstype, &shift))
		return CONTINUE;
	if ((d->args[0] && read_string(mem_fd, d->args[0], source, sizeof(source)) < 0) || read_string(mem_fd, d->args[1], target, sizeof(target)) < 0)
		return -EFAULT;
	if (d->args[4] && read_string(mem_fd, d->args[4], data, sizeof(data)) < 0)
		return -EFAULT;
	long euid, egid, fsuid, fsgid;
	int ns_root;
	if (caller_euid(proc_fd, &euid, &egid, &ns_root, status, sizeof(status)) < 0 ||
	    status_field(status, "Uid", 3, &fsuid) < 0 || status_field(status, "Gid", 3, &fsgid) < 0)
		return -EPERM;
	/* The kernel's rule for mount in the caller's namespace: CAP_SYS_ADMIN there. */
	unsigned long long caps = 0;
	const char *eff = strstr(status, "\nCapEff:");
	if (!eff || sscanf(eff + 8, "%llx", &caps) != 1 || !((caps >> CAP_SYS_ADMIN) & 1))
		return -EPERM;
	if (!strcmp(fstype, "hugetlbfs") && hugetlbfs_owner(proc_fd, euid, egid, data, sizeof(data)) < 0)
		return -EINVAL;
	struct mount_request r = {
		.source = d->args[0] ? source : NULL, .target = target, .fstype = fstype, .data = data,
		.flags = (unsigned long)d->args[3], .fsuid = (uid_t)fsuid, .fsgid = (gid_t)fsgid, .userns_fd = -1,
	};
	/* hugetlbfs already belongs to the caller (and cannot be idmapped). */
	int shifted = shift && strcmp(fstype, "hugetlbfs") != 0;
	if (device_cgroup(proc_fd, r.cgroup_procs, sizeof(r.cgroup_procs)) < 0)
		return -EPERM;
	r.mnt_fd = openat(proc_fd, "ns/mnt", O_RDONLY | O_CLOEXEC);
	r.root_fd = openat(proc_fd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r.cwd_fd = openat(proc_fd, "cwd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (shifted)
		r.userns_fd = openat(proc_fd, "ns/user", O_RDONLY | O_CLOEXEC);
	int ret = -EPERM;
	if (r.mnt_fd >= 0 && r.root_fd >= 0 && r.cwd_fd >= 0 && (!shifted || r.userns_fd >= 0)) {
		ret = -ENOENT;
		if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &p->req.id) == 0)
			ret = in_child(mount_in_child, &r, MOUNT_TIMEOUT_MS);
	}
	if (r.mnt_fd >= 0)
		close(r.mnt_fd);
	if (r.root_fd >= 0)
		close(r.root_fd);
	if (r.cwd_fd >= 0)
		close(r.cwd_fd);
	if (r.userns_fd >= 0)
		close(r.userns_fd);
	return ret;
}

/* The unified hierarchy's mount point (hybrid hosts mount it below the v1 ones). */
static const char *unified_mount(void)
{
	return access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0 ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";
}

/* Whether a directory at or below dir (depth-bounded) is the cgroup with this inode. */
static int cgroup_below(int dir_fd, ino_t ino, int depth)
{
	struct stat st;
	if (fstat(dir_fd, &st) < 0)
		return 0;
	if (st.st_ino == ino)
		return 1;
	if (depth <= 0)
		return 0;
	int copy = dup(dir_fd);
	DIR *dir = copy < 0 ? NULL : fdopendir(copy);
	if (!dir) {
		if (copy >= 0)
			close(copy);
		return 0;
	}
	int found = 0;
	for (struct dirent *e; !found && (e = readdir(dir));) {
		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int sub = openat(dir_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sub >= 0) {
			found = cgroup_below(sub, ino, depth - 1);
			close(sub);
		}
	}
	closedir(dir);
	return found;
}

/*
 * Whether a cgroup (an fd of ours) is the caller's container's or below it: the unified cgroup
 * that holds the caller, cut after liblxc's `lxc.payload.<name>` directory.
 */
static int cgroup_of_container(int proc_fd, int cgroup_fd)
{
	char buf[4096], dir[4096];
	struct stat target, unified;
	if (read_proc_file(proc_fd, "cgroup", buf, sizeof(buf)) < 0 || fstat(cgroup_fd, &target) < 0 ||
	    stat(unified_mount(), &unified) < 0 || target.st_dev != unified.st_dev || !S_ISDIR(target.st_mode))
		return 0;
	char *line = strstr(buf, "0::");
	if (!line || (line != buf && line[-1] != '\n'))
		return 0;
	line += 3;
	line[strcspn(line, "\n")] = '\0';
	char *payload = strstr(line, "/lxc.payload.");
	if (!payload)
		return 0;
	char *end = strchr(payload + 1, '/');
	if (end)
		*end = '\0';
	if (snprintf(dir, sizeof(dir), "%s%s", unified_mount(), line) >= (int)sizeof(dir))
		return 0;
	int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		return 0;
	int found = cgroup_below(dir_fd, target.st_ino, 16);
	close(dir_fd);
	return found;
}

#define MAX_INSNS 1000000

/*
 * bpf for device programs (security.syscalls.intercept.bpf.devices), as the reference: loading a
 * cgroup device program (the fd given to the caller) and attaching it to, or detaching it from, a
 * cgroup of the caller's container. Only the fields these commands need are passed on: an fd or a
 * pointer of the caller's is never taken as one of ours. Anything else goes on to the kernel.
 * *val receives the new fd's number in the caller.
 */
static int handle_bpf(const struct packet *p, int proc_fd, int mem_fd, int notify_fd, uint64_t *val)
{
	const struct seccomp_data *d = &p->req.data;
	char policy_file[4096], policy[POLICY_MAX];
	const char *cookie = p->cookie;
	if (in_host_userns(proc_fd) || !*cookie || strchr(cookie, '/') || !strcmp(cookie, ".") || !strcmp(cookie, ".."))
		return CONTINUE;
	snprintf(policy_file, sizeof(policy_file), "%s/%s/seccomp.intercept", lxcpath, cookie);
	int pfd = open(policy_file, O_RDONLY | O_CLOEXEC);
	ssize_t n = pfd < 0 ? -1 : read(pfd, policy, sizeof(policy) - 1);
	if (pfd >= 0)
		close(pfd);
	if (n <= 0)
		return CONTINUE;
	policy[n] = '\0';
	const char *devices = policy_value(policy, "bpf.devices");
	if (!devices || *devices != '1')
		return CONTINUE;
	union bpf_attr attr, call;
	memset(&attr, 0, sizeof(attr));
	memset(&call, 0, sizeof(call));
	size_t size = (size_t)d->args[2];
	if (size > sizeof(attr))
		return -E2BIG;
	if (pread(mem_fd, &attr, size, (off_t)d->args[1]) != (ssize_t)size)
		return -EFAULT;
	int cmd = (int)d->args[0];
	if (cmd == BPF_PROG_LOAD) {
		if (attr.prog_type != BPF_PROG_TYPE_CGROUP_DEVICE)
			return CONTINUE;
		if (attr.insn_cnt == 0 || attr.insn_cnt > MAX_INSNS)
			return -EINVAL;
		size_t insns_size = (size_t)attr.insn_cnt * sizeof(struct bpf_insn);
		struct bpf_insn *insns = malloc(insns_size);
		char license[128] = "", log[4096] = "";
		if (!insns)
			return -ENOMEM;
		int ret = 0;
		if (pread(mem_fd, insns, insns_size, (off_t)attr.insns) != (ssize_t)insns_size ||
		    (attr.license && read_string(mem_fd, attr.license, license, sizeof(license)) < 0))
			ret = -EFAULT;
		if (!ret) {
			call.prog_type = attr.prog_type;
			call.insn_cnt = attr.insn_cnt;
			call.insns = (uint64_t)(uintptr_t)insns;
			call.license = (uint64_t)(uintptr_t)license;
			call.expected_attach_type = attr.expected_attach_type;
			memcpy(call.prog_name, attr.prog_name, sizeof(call.prog_name));
			if (attr.log_level && attr.log_size && attr.log_buf) {
				call.log_level = attr.log_level;
				call.log_size = attr.log_size < sizeof(log) ? attr.log_size : sizeof(log);
				call.log_buf = (uint64_t)(uintptr_t)log;
			}
			int prog = (int)syscall(__NR_bpf, BPF_PROG_LOAD, &call, sizeof(call));
			if (prog < 0) {
				ret = -errno;
				/* The verifier's words go back to the caller's buffer, as the kernel would write them. */
				if (call.log_size && pwrite(mem_fd, log, call.log_size, (off_t)attr.log_buf) < 0)
					ret = -EFAULT;
			} else if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &p->req.id) < 0) {
				ret = -ENOENT;
				close(prog);
			} else {
				struct seccomp_notif_addfd addfd = { .id = p->req.id, .srcfd = (uint32_t)prog, .newfd_flags = O_CLOEXEC };
				int remote = ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &addfd);
				ret = remote < 0 ? -errno : 0;
				if (remote >= 0)
					*val = (uint64_t)remote;
				close(prog);
			}
		}
		free(insns);
		return ret;
	}
	if (cmd != BPF_PROG_ATTACH && cmd != BPF_PROG_DETACH)
		return CONTINUE;
	if (attr.attach_type != BPF_CGROUP_DEVICE)
		return CONTINUE;
	/* An fd to replace would be one more of the caller's fds: not taken. */
	if (attr.attach_flags & ~(uint32_t)(BPF_F_ALLOW_OVERRIDE | BPF_F_ALLOW_MULTI))
		return -EINVAL;
	char status[4096];
	long tgid;
	if (read_proc_file(proc_fd, "status", status, sizeof(status)) < 0 || status_field(status, "Tgid", 0, &tgid) < 0)
		return -ESRCH;
	int pidfd = (int)syscall(__NR_pidfd_open, (pid_t)tgid, 0);
	if (pidfd < 0)
		return -ESRCH;
	int ret = 0;
	int target = -1, prog = -1;
	/* The fds are the caller's only while its call is pending. */
	if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &p->req.id) < 0)
		ret = -ENOENT;
	else if ((target = (int)syscall(__NR_pidfd_getfd, pidfd, (int)attr.target_fd, 0)) < 0)
		ret = -EBADF;
	else if (!cgroup_of_container(proc_fd, target))
		ret = -EPERM;
	else {
		prog = (int)syscall(__NR_pidfd_getfd, pidfd, (int)attr.attach_bpf_fd, 0);
		if (prog < 0 && cmd == BPF_PROG_ATTACH)
			ret = -EBADF;
	}
	if (!ret && ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &p->req.id) < 0)
		ret = -ENOENT;
	if (!ret) {
		call.target_fd = (uint32_t)target;
		call.attach_bpf_fd = prog < 0 ? 0 : (uint32_t)prog;
		call.attach_type = attr.attach_type;
		call.attach_flags = attr.attach_flags;
		/* Detaching without a program names none: an fd that is no program, as the kernel takes it. */
		if (prog < 0)
			call.attach_bpf_fd = (uint32_t)-1;
		if (syscall(__NR_bpf, cmd, &call, sizeof(call)) < 0)
			ret = -errno;
	}
	if (target >= 0)
		close(target);
	if (prog >= 0)
		close(prog);
	close(pidfd);
	return ret;
}

/*
 * The answer to one notification: 0 or a negative errno for the caller, or CONTINUE. What is not
 * served here goes on to the kernel, which refuses it as it would without interception (a device
 * outside the list in an unprivileged container) or allows it (a privileged container).
 */
static int handle(struct packet *p, int proc_fd, int mem_fd, int notify_fd, uint64_t *val)
{
	const struct seccomp_data *d = &p->req.data;
	int mknod_nr = -1, mknodat_nr = -1, setxattr_nr = -1, mount_nr = -1, sched_nr = -1, bpf_nr = -1;
	if (d->arch == AUDIT_ARCH_X86_64) {
		mknod_nr = 133, mknodat_nr = 259, setxattr_nr = 188, mount_nr = 165, sched_nr = 144, bpf_nr = 321;
	} else if (d->arch == AUDIT_ARCH_I386) {
		mknod_nr = 14, mknodat_nr = 297, setxattr_nr = 226, mount_nr = 21, sched_nr = 156, bpf_nr = 357;
	} else if (d->arch == AUDIT_ARCH_AARCH64) {
		mknodat_nr = 33, setxattr_nr = 5, mount_nr = 40, sched_nr = 119, bpf_nr = 280;
	}
	if (proc_fd < 0 || mem_fd < 0 || notify_fd < 0)
		return CONTINUE;
	if ((int)d->nr == sched_nr)
		return handle_sched(&p->req, proc_fd, mem_fd, notify_fd);
	if ((int)d->nr == mount_nr)
		return handle_mount(p, proc_fd, mem_fd, notify_fd);
	if ((int)d->nr == bpf_nr)
		return handle_bpf(p, proc_fd, mem_fd, notify_fd, val);
	char path[4096];
	struct request r = { .dirfd = AT_FDCWD, .path = path };
	uint64_t path_arg;
	if ((int)d->nr == setxattr_nr) {
		/* Only the overlay "opaque" mark (value "y", size 1), as the reference. */
		char name[64], value[2] = { 0 };
		if (d->args[3] != 1 || read_string(mem_fd, d->args[1], name, sizeof(name)) < 0 ||
		    strcmp(name, "trusted.overlay.opaque") != 0 || pread(mem_fd, value, 1, (off_t)d->args[2]) != 1 || value[0] != 'y')
			return CONTINUE;
		r.action = MARK_OPAQUE;
		r.xattr_flags = (int)d->args[4];
		path_arg = d->args[0];
	} else {
		uint64_t mode_arg, dev_arg;
		if ((int)d->nr == mknod_nr) {
			path_arg = d->args[0], mode_arg = d->args[1], dev_arg = d->args[2];
		} else if ((int)d->nr == mknodat_nr) {
			r.dirfd = (int)(int32_t)d->args[0];
			path_arg = d->args[1], mode_arg = d->args[2], dev_arg = d->args[3];
		} else {
			return CONTINUE;
		}
		unsigned int major, minor;
		decode_dev(dev_arg, &major, &minor);
		r.action = MAKE_NODE;
		r.mode = (mode_t)mode_arg;
		r.dev = makedev(major, minor);
		if (!device_allowed(r.mode, major, minor))
			return CONTINUE;
	}
	int ret = read_string(mem_fd, path_arg, path, sizeof(path));
	if (ret < 0)
		return ret;
	if (path[0] == '\0')
		return -ENOENT;
	return act_as_caller(proc_fd, notify_fd, p->req.id, &r);
}

/* One packet from a monitor; 0 to keep the connection, -1 to drop it. */
static int serve(int conn)
{
	struct packet p;
	memset(&p, 0, sizeof(p));
	struct iovec iov[4] = {
		{ &p.msg, sizeof(p.msg) }, { &p.req, sizeof(p.req) }, { &p.resp, sizeof(p.resp) }, { p.cookie, COOKIE_MAX },
	};
	char control[CMSG_SPACE(3 * sizeof(int))];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 4, .msg_control = control, .msg_controllen = sizeof(control) };
	ssize_t n = recvmsg(conn, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return -1;
	int fds[3] = { -1, -1, -1 };
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count && i < 3; i++)
			memcpy(&fds[i], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (p.msg.cookie_len < COOKIE_MAX)
		p.cookie[p.msg.cookie_len] = '\0';
	int answer;
	int valid = (size_t)n >= PACKET_MIN && p.msg.reserved == 0 &&
		    p.msg.sizes.seccomp_notif == kernel_sizes.seccomp_notif &&
		    p.msg.sizes.seccomp_notif_resp == kernel_sizes.seccomp_notif_resp &&
		    p.msg.sizes.seccomp_data == kernel_sizes.seccomp_data;
	if (!valid) {
		/* An empty answer: liblxc sees the short reply and answers the kernel itself. */
		struct msghdr empty = { 0 };
		sendmsg(conn, &empty, MSG_NOSIGNAL);
		answer = 1;
	} else {
		uint64_t val = 0;
		int err = handle(&p, fds[0], fds[1], fds[2], &val);
		p.resp.id = p.req.id;
		p.resp.val = err == 0 ? (int64_t)val : 0;
		p.resp.error = err == CONTINUE ? 0 : err;
		p.resp.flags = err == CONTINUE ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
		struct msghdr out = { .msg_iov = iov, .msg_iovlen = 3 };
		answer = sendmsg(conn, &out, MSG_NOSIGNAL) == (ssize_t)PACKET_MIN ? 0 : -1;
	}
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return answer < 0 ? -1 : 0;
}

/* The socket's path and what was bound there: an orphaned server ends once another proxy has bound it. */
static const char *socket_path;
static dev_t bound_dev;
static ino_t bound_ino;

static int hold(int lfd);
static int serve_connections(int lfd, int life_fd);

int main(int argc, char **argv)
{
	if (argc != 3 || strlen(argv[1]) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		say("usage: corral-seccomp-proxy <socket path (under 108 bytes)> <lxcpath>");
		return 2;
	}
	lxcpath = argv[2];
	if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &kernel_sizes) != 0) {
		say("the kernel has no seccomp user notification: %s", strerror(errno));
		return 3;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Ends when the daemon does, even if the daemon could not tell us. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() == 1)
		return 1;
	/*
	 * Bound beside the path and renamed over it: a monitor that reconnects while a previous proxy's
	 * server still serves (see hold) reaches one of the two, never a missing file. A path with no
	 * room for the suffix is replaced in place.
	 */
	int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int beside = strlen(argv[1]) + 1 < sizeof(addr.sun_path);
	snprintf(addr.sun_path, sizeof(addr.sun_path), beside ? "%s~" : "%s", argv[1]);
	unlink(addr.sun_path);
	mode_t old = umask(077);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(lfd, 64) < 0 ||
	    (beside && rename(addr.sun_path, argv[1]) < 0)) {
		say("cannot listen on %s: %s", argv[1], strerror(errno));
		if (beside)
			unlink(addr.sun_path);
		return 1;
	}
	umask(old);
	struct stat bound;
	if (stat(argv[1], &bound) < 0) {
		say("cannot stat %s: %s", argv[1], strerror(errno));
		return 1;
	}
	socket_path = argv[1];
	bound_dev = bound.st_dev;
	bound_ino = bound.st_ino;
	/* The daemon waits for this line before it starts a container that needs us. */
	printf("ready\n");
	fflush(stdout);
	return hold(lfd);
}

/* The holder's running server, ended with it when the holder is told to stop. */
static volatile pid_t serving = -1;

static void stop_holder(int sig)
{
	(void)sig;
	if (serving > 0)
		kill(serving, SIGKILL);
	_exit(0);
}

/*
 * The listening socket outlives any one server: this process only holds it and runs a server
 * child, started again at once should it die. A monitor that connects meanwhile waits in the
 * backlog instead of being refused, which matters: once a monitor's reconnect is refused,
 * liblxc gives no listener to the container's new exec sessions (their intercepted calls fail
 * with ENOSYS) until the container's own processes make an intercepted call.
 *
 * Told to stop (SIGTERM: the daemon stops, or it died), the holder ends its server with it. A holder
 * that dies otherwise leaves its server serving, on the same socket, until the daemon's next proxy
 * has bound the path (see serve_connections): the gap between the two is never a refusal either.
 */
static int hold(int lfd)
{
	/* The server sees the holder gone when the write end, held here only, closes. */
	int life[2];
	if (pipe2(life, O_CLOEXEC) < 0) {
		say("pipe: %s", strerror(errno));
		return 1;
	}
	struct sigaction stop = { .sa_handler = stop_holder };
	sigemptyset(&stop.sa_mask);
	sigaction(SIGTERM, &stop, NULL);
	/* A stop between the fork and the note of the server's pid would leave the server behind. */
	sigset_t term, unblocked;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	for (;;) {
		sigprocmask(SIG_BLOCK, &term, &unblocked);
		pid_t server = fork();
		if (server < 0) {
			say("fork: %s", strerror(errno));
			return 1;
		}
		if (server == 0) {
			signal(SIGTERM, SIG_DFL);
			sigprocmask(SIG_SETMASK, &unblocked, NULL);
			close(life[1]);
			_exit(serve_connections(lfd, life[0]));
		}
		serving = server;
		sigprocmask(SIG_SETMASK, &unblocked, NULL);
		int status;
		while (waitpid(server, &status, 0) < 0)
			if (errno != EINTR)
				return 1;
		serving = -1;
		say("the server exited (%s %d): starting another", WIFSIGNALED(status) ? "signal" : "code",
		    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		/* Never a tight loop. */
		usleep(50 * 1000);
	}
}

/* How long a server outlives its holder when no other proxy binds the path (the daemon is gone too). */
#define ORPHAN_MAX_MS 30000
#define ORPHAN_LOOK_MS 50

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether another proxy has bound the socket's path since this one did. */
static int path_taken_over(void)
{
	struct stat st;
	return stat(socket_path, &st) == 0 && (st.st_dev != bound_dev || st.st_ino != bound_ino);
}

/*
 * Accepts monitors and answers their packets, one at a time. Orphaned (the holder gone), it goes on
 * until another proxy has bound the path, then ends: the monitors it served find their connection
 * closed at their next packet and reconnect, to a proxy that listens.
 */
static int serve_connections(int lfd, int life_fd)
{
	struct pollfd pfds[MAX_CLIENTS + 2];
	int count = 2;
	/* Past this (monotonic ms), an orphaned server ends; 0 while the holder lives. */
	long long orphan_deadline = 0;
	pfds[0].fd = lfd;
	pfds[0].events = POLLIN;
	pfds[1].fd = life_fd;
	pfds[1].events = POLLIN;
	for (;;) {
		int ready = poll(pfds, (nfds_t)count, orphan_deadline ? ORPHAN_LOOK_MS : -1);
		if (ready < 0) {
			if (errno == EINTR)
				continue;
			say("poll: %s", strerror(errno));
			return 1;
		}
		if (pfds[1].fd >= 0 && pfds[1].revents) {
			/* Only the holder writes nothing and holds the other end: it is gone. */
			pfds[1].fd = -1;
			orphan_deadline = now_ms() + ORPHAN_MAX_MS;
		}
		if (orphan_deadline && (path_taken_over() || now_ms() >= orphan_deadline))
			return 0;
		for (int i = count - 1; i >= 2; i--) {
			if (!pfds[i].revents)
				continue;
			if ((pfds[i].revents & POLLIN) && serve(pfds[i].fd) == 0)
				continue;
			close(pfds[i].fd);
			pfds[i] = pfds[--count];
		}
		if (pfds[0].revents & POLLIN) {
			int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (conn >= 0 && count <= MAX_CLIENTS + 1) {
				pfds[count].fd = conn;
				pfds[count].events = POLLIN;
				pfds[count].revents = 0;
				count++;
			} else if (conn >= 0) {
				close(conn);
			}
		}
	}
}
