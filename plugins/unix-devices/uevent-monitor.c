/*
 * corral-uevents: relays the kernel's device announcements (netlink uevents, the same ones udev
 * reads; no udev daemon needed) to the daemon. Each announcement is written to stdout as one
 * line: the action and the device path, then its KEY=VALUE fields, separated by tabs (the kernel
 * puts no tabs or newlines in them). Only announcements that name a device node (DEVNAME) are
 * relayed. Exits when its output is closed or the socket fails.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
  if (fd < 0) {
    perror("corral-uevents: netlink socket");
    return 1;
  }
  /* A burst of announcements (many loop devices at once) must not be dropped while the daemon is busy. */
  int size = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  struct sockaddr_nl addr = {.nl_family = AF_NETLINK, .nl_pid = 0, .nl_groups = 1};
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    perror("corral-uevents: bind");
    return 1;
  }
  setvbuf(stdout, NULL, _IOFBF, 1 << 16);
  printf("READY\n");
  fflush(stdout);
  char buf[16384];
  for (;;) {
    struct sockaddr_nl from;
    struct iovec iov = {buf, sizeof buf - 1};
    struct msghdr msg = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n = recvmsg(fd, &msg, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        /* Some were lost: the daemon rescans what it watches. */
        printf("OVERFLOW\n");
        fflush(stdout);
        continue;
      }
      perror("corral-uevents: recv");
      return 1;
    }
    /* Only the kernel (port 0) speaks for devices; anything else on the group is ignored. */
    if (from.nl_pid != 0 || (msg.msg_flags & MSG_TRUNC)) continue;
    buf[n] = '\0';
    /* Kernel messages start with "action@devpath"; libudev's own ("libudev" magic) do not. */
    if (!strchr(buf, '@')) continue;
    int named = 0;
    for (char *p = buf + strlen(buf) + 1; p < buf + n; p += strlen(p) + 1) {
      if (strncmp(p, "DEVNAME=", 8) == 0) named = 1;
    }
    if (!named) continue;
    fputs(buf, stdout);
    for (char *p = buf + strlen(buf) + 1; p < buf + n; p += strlen(p) + 1) {
      if (*p == '\0' || strchr(p, '\t') || strchr(p, '\n')) continue;
      putchar('\t');
      fputs(p, stdout);
    }
    putchar('\n');
    if (fflush(stdout) != 0) return 0;
  }
}
