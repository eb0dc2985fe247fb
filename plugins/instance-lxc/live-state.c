/*
 * corral-livestate: the live state of running containers, read beside the daemon's event loop. The
 * daemon writes one line per container: its init's process id, then tab-separated paths of files to
 * read (its cgroup counters). This answers with each file's content, then the interfaces and addresses
 * of that process's network namespace over rtnetlink, then "E". Two netlink dumps cost ~35 us per
 * container where the files under /proc/<pid>/net and the container's sysfs cost ~220 us, and the
 * reads run on another core than the daemon's (recursion=2 over a thousand running containers, issue 21).
 *
 * Answer lines (fields separated by one space; names and contents hex-encoded, so no byte can break a line):
 *   F <n> <content-hex|->  the n-th file asked (from 0), or - when it could not be read; no line for a
 *                     file over 64 KiB
 *   L <index> <name-hex> <flags> <mtu> <hwaddr|-> <rx_bytes> <tx_bytes> <rx_packets> <tx_packets>
 *     <rx_errors> <tx_errors> <rx_dropped> <tx_dropped>
 *   A <index> <4|6> <address> <prefix length> <scope>
 *   E                 end of this process's answer
 *   X <errno>         nothing could be read (the daemon then reads /proc itself)
 * It exits when stdin closes, and with the daemon (parent death signal).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[1 << 16];

/* Sends a dump request and passes each answer message to `each`; 0, or an errno. */
static int dump(int sock, int type, void (*each)(struct nlmsghdr *)) {
  struct {
    struct nlmsghdr h;
    struct rtgenmsg g;
  } req;
  memset(&req, 0, sizeof req);
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = type;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.h.nlmsg_seq = 1;
  req.g.rtgen_family = AF_UNSPEC;
  if (send(sock, &req, sizeof req, 0) < 0) return errno;
  for (;;) {
    ssize_t n = recv(sock, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EPIPE;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE) return 0;
      if (h->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *e = NLMSG_DATA(h);
        return e->error ? -e->error : 0;
      }
      each(h); /* each keeps only its own kind (RTM_NEWLINK, RTM_NEWADDR) */
    }
  }
}

/* Up to `len` bytes, or to the first NUL (netlink names carry one); written a block at a time. */
static void put_hex(const char *s, size_t len) {
  static const char digits[] = "0123456789abcdef";
  char out[256];
  size_t used = 0;
  for (size_t i = 0; i < len && s[i]; i++) {
    out[used++] = digits[(unsigned char)s[i] >> 4];
    out[used++] = digits[(unsigned char)s[i] & 15];
    if (used == sizeof out) {
      fwrite(out, 1, used, stdout);
      used = 0;
    }
  }
  fwrite(out, 1, used, stdout);
}

static void each_link(struct nlmsghdr *h) {
  if (h->nlmsg_type != RTM_NEWLINK) return;
  struct ifinfomsg *ifi = NLMSG_DATA(h);
  int len = h->nlmsg_len - NLMSG_LENGTH(sizeof *ifi);
  const char *name = NULL;
  size_t name_len = 0;
  unsigned mtu = 0;
  const unsigned char *hw = NULL;
  int hw_len = 0;
  struct rtnl_link_stats64 stats;
  memset(&stats, 0, sizeof stats);
  for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    switch (a->rta_type) {
      case IFLA_IFNAME: name = RTA_DATA(a); name_len = RTA_PAYLOAD(a); break;
      case IFLA_MTU: if (RTA_PAYLOAD(a) >= sizeof mtu) memcpy(&mtu, RTA_DATA(a), sizeof mtu); break;
      case IFLA_ADDRESS: hw = RTA_DATA(a); hw_len = RTA_PAYLOAD(a); break;
      case IFLA_STATS64:
        memcpy(&stats, RTA_DATA(a), RTA_PAYLOAD(a) < sizeof stats ? RTA_PAYLOAD(a) : sizeof stats);
        break;
    }
  }
  if (!name) return;
  printf("L %d ", ifi->ifi_index);
  put_hex(name, name_len);
  printf(" %u %u ", ifi->ifi_flags, mtu);
  if (hw_len > 0) {
    for (int i = 0; i < hw_len; i++) printf(i ? ":%02x" : "%02x", hw[i]);
  } else {
    printf("-");
  }
  /* As /proc/net/dev counts them: drops include missed frames on receive, carrier errors on send. */
  printf(" %llu %llu %llu %llu %llu %llu %llu %llu\n",
         (unsigned long long)stats.rx_bytes, (unsigned long long)stats.tx_bytes,
         (unsigned long long)stats.rx_packets, (unsigned long long)stats.tx_packets,
         (unsigned long long)stats.rx_errors, (unsigned long long)stats.tx_errors,
         (unsigned long long)(stats.rx_dropped + stats.rx_missed_errors),
         (unsigned long long)stats.tx_dropped);
}

static void each_address(struct nlmsghdr *h) {
  if (h->nlmsg_type != RTM_NEWADDR) return;
  struct ifaddrmsg *ifa = NLMSG_DATA(h);
  if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6) return;
  int len = h->nlmsg_len - NLMSG_LENGTH(sizeof *ifa);
  const void *address = NULL, *local = NULL;
  for (struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == IFA_ADDRESS) address = RTA_DATA(a);
    if (a->rta_type == IFA_LOCAL) local = RTA_DATA(a);
  }
  /* On a point-to-point link IFA_ADDRESS is the peer; IFA_LOCAL is this end's own. */
  const void *own = local ? local : address;
  if (!own) return;
  char text[INET6_ADDRSTRLEN];
  if (!inet_ntop(ifa->ifa_family, own, text, sizeof text)) return;
  printf("A %u %d %s %u %u\n", ifa->ifa_index, ifa->ifa_family == AF_INET ? 4 : 6, text, ifa->ifa_prefixlen, ifa->ifa_scope);
}

/* Files are read whole: cgroup files hand out at most a page per read. One larger than this is left out of
 * the answer, and the daemon reads it itself. */
static char content[1 << 16];

static void put_file(int n, const char *path) {
  size_t total = 0;
  ssize_t got = -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    while (total < sizeof content && (got = read(fd, content + total, sizeof content - total)) > 0) total += (size_t)got;
    char more;
    int overflow = got > 0 && read(fd, &more, 1) > 0;
    close(fd);
    if (overflow) return;
  }
  printf("F %d ", n);
  if (got < 0) {
    printf("-\n");
    return;
  }
  put_hex(content, total);
  printf("\n");
}

static int answer(long pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/ns/net", pid);
  int ns = open(path, O_RDONLY | O_CLOEXEC);
  if (ns < 0) return errno;
  int failed = setns(ns, CLONE_NEWNET) < 0 ? errno : 0;
  close(ns);
  if (failed) return failed;
  int sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (sock < 0) return errno;
  /* A reply stuck in a frozen or odd namespace must not hold the daemon's listing: bounded reads. */
  struct timeval bound = {.tv_sec = 1};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  failed = dump(sock, RTM_GETLINK, each_link);
  if (!failed) failed = dump(sock, RTM_GETADDR, each_address);
  close(sock);
  return failed;
}

int main(void) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGPIPE, SIG_DFL);
  char *line = NULL;
  size_t size = 0;
  ssize_t len;
  while ((len = getline(&line, &size, stdin)) > 0) {
    if (line[len - 1] == '\n') line[len - 1] = '\0';
    char *rest = line;
    char *first = strsep(&rest, "\t");
    char *end;
    long pid = strtol(first, &end, 10);
    if (pid <= 0 || *end != '\0') {
      printf("X %d\n", EINVAL);
    } else {
      for (int n = 0; rest; n++) put_file(n, strsep(&rest, "\t"));
      int failed = answer(pid);
      /* Lines already printed for a half-read namespace are dropped by the daemon on X. */
      if (failed) printf("X %d\n", failed);
      else printf("E\n");
    }
    if (fflush(stdout) != 0) return 1;
  }
  free(line);
  return 0;
}
