/*
 * corral-attach-order.so: preloaded into every lxc-attach the daemon runs (LD_PRELOAD), it closes
 * two races of liblxc 5.0's attach on hosts without an LSM (AppArmor, SELinux):
 *
 * 1. lxc-attach forks a transient process, which enters the container's namespaces, clones the
 *    process that will run the command and sends that process's pid to lxc-attach over a socket
 *    the three share. The attached process, once its seccomp filter is loaded, sends its seccomp
 *    listener fd over the same socket. Nothing orders the two sends unless an LSM label is to be
 *    handed over, so when the transient process is slow the listener arrives where lxc-attach
 *    reads the pid: lxc-attach fails without a word (exit 1, whatever the command did) and the
 *    command runs with no listener, its intercepted calls failing with ENOSYS.
 *    Here the attached process waits, before it loads its filter, for the transient process to
 *    exit, which it does right after sending the pid.
 *
 * 2. lxc-attach re-executes itself from a sealed memfd; sealing fails with EBUSY while pages of
 *    the copy are still briefly referenced, and lxc-attach then aborts. The seal is tried again.
 *
 * Everything else passes through unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* How long the attached process waits for the transient process; it exits within microseconds. */
#define TRANSIENT_WAIT_MS 5000
#define SEAL_ATTEMPTS 200
#define SEAL_PAUSE_NS (5 * 1000 * 1000)

/* In a child made by fork(): a pidfd of that child itself, inherited by what it clones. */
static int forked_self_pidfd = -1;

pid_t fork(void)
{
	static pid_t (*real_fork)(void);
	if (!real_fork)
		real_fork = (pid_t (*)(void))dlsym(RTLD_NEXT, "fork");
	pid_t pid = real_fork();
	if (pid == 0)
		forked_self_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0); /* always close-on-exec */
	return pid;
}

/* libseccomp's, called by liblxc in the attached process just before it sends the listener. */
int seccomp_load(const void *ctx)
{
	static int (*real_load)(const void *);
	if (!real_load)
		real_load = (int (*)(const void *))dlsym(RTLD_NEXT, "seccomp_load");
	if (forked_self_pidfd >= 0) {
		/* The fd names the process that cloned us (the transient one): readable once it exited. */
		struct pollfd transient = { .fd = forked_self_pidfd, .events = POLLIN };
		while (poll(&transient, 1, TRANSIENT_WAIT_MS) < 0 && errno == EINTR)
			;
		close(forked_self_pidfd);
		forked_self_pidfd = -1;
	}
	return real_load(ctx);
}

int fcntl64(int fd, int cmd, ...)
{
	static int (*real_fcntl)(int, int, ...);
	if (!real_fcntl)
		real_fcntl = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl64");
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	int ret = real_fcntl(fd, cmd, arg);
	for (int i = 1; ret < 0 && errno == EBUSY && cmd == F_ADD_SEALS && i < SEAL_ATTEMPTS; i++) {
		struct timespec pause = { 0, SEAL_PAUSE_NS };
		nanosleep(&pause, NULL);
		ret = real_fcntl(fd, cmd, arg);
	}
	return ret;
}
