/*
 * corral-spawner: starts processes for the daemon, so that the daemon's event loop never waits on a
 * fork and exec (node's child_process blocks its caller until the child has exec'd: ~2-3 ms each,
 * a fifth of the daemon's time under a load of `lxc exec`s, issue 21).
 *
 * argv[1]: the hex name of the daemon's abstract unix socket. For each request line on stdin this
 * connects to that socket three times (the child's stdin, stdout and stderr), introduces each
 * connection with "<token> <n>\n", then forks and execs the command with them as its stdio.
 *
 * Request (fields separated by one space, strings hex-encoded):
 *   S <id> <token> <flags> <cwd-hex|-> <file-hex> <argc> <arg-hex>... <envc> <env-hex>...
 *     envc "-" (and no entries): the child gets this helper's own environment.
 *     flags bit 0: the child dies with this helper (parent death signal), which dies with the daemon.
 * Answers on stdout:
 *   P <id> <pid>               started
 *   F <id> <errno>             not started (connecting back, forking or exec failed)
 *   X <id> <code> <signal>     exited (code -1 when killed by a signal)
 * Stdin closed: this exits; children asked to die with it do.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static struct sockaddr_un address;
static socklen_t address_len;

/* Children by pid, to name them when they exit. */
struct child {
  pid_t pid;
  long id;
};
static struct child *children;
static size_t child_count, child_cap;

static int unhex(char *s) {
  size_t n = strlen(s);
  if (n % 2) return -1;
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
    s[i] = (char)v;
  }
  s[n / 2] = '\0';
  return 0;
}

static int connect_back(const char *token, int n) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  if (connect(s, (struct sockaddr *)&address, address_len) < 0) {
    int e = errno;
    close(s);
    errno = e;
    return -1;
  }
  char intro[128];
  int len = snprintf(intro, sizeof intro, "%s %d\n", token, n);
  if (write(s, intro, len) != len) {
    int e = errno ? errno : EIO;
    close(s);
    errno = e;
    return -1;
  }
  return s;
}

/* Runs in the child: never returns. */
static void exec_child(int fds[3], int report, int flags, const char *cwd, char *file, char **argv, char **envp) {
  if (flags & 1) prctl(PR_SET_PDEATHSIG, SIGKILL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  for (int i = 0; i < 3; i++) {
    /* The sockets are close-on-exec and above 2: dup2 gives a copy without the flag. */
    if (dup2(fds[i], i) < 0) goto failed;
  }
  if (cwd && chdir(cwd) < 0) goto failed;
  environ = envp;
  execvp(file, argv);
failed:;
  int e = errno;
  if (write(report, &e, sizeof e) < 0) { /* the helper sees the pipe close without a word */ }
  _exit(127);
}

static void start(long id, const char *token, int flags, const char *cwd, char *file, char **argv, int argc, char **envp, int envc);
static void start_with(long id, const char *token, int flags, const char *cwd, char *file, char **argv, int argc, char **env);
static void start_child(long id, const char *token, int flags, const char *cwd, char *file, char **args, char **env);

static void request(char *line) {
  char *fields[4096];
  int count = 0;
  for (char *f = strtok(line, " \n"); f && count < 4096; f = strtok(NULL, " \n")) fields[count++] = f;
  if (count < 7 || strcmp(fields[0], "S") != 0) return;
  long id = atol(fields[1]);
  const char *token = fields[2];
  int flags = atoi(fields[3]);
  char *cwd = strcmp(fields[4], "-") == 0 ? NULL : fields[4];
  char *file = fields[5];
  int argc = atoi(fields[6]);
  if (argc < 1 || 7 + argc >= count) goto invalid;
  int inherit = strcmp(fields[7 + argc], "-") == 0;
  int envc = inherit ? 0 : atoi(fields[7 + argc]);
  if (envc < 0 || 8 + argc + envc != count) goto invalid;
  char **argv = &fields[7];
  char **envp = &fields[8 + argc];
  if ((cwd && unhex(cwd)) || unhex(file)) goto invalid;
  for (int i = 0; i < argc; i++) if (unhex(argv[i])) goto invalid;
  for (int i = 0; i < envc; i++) if (unhex(envp[i])) goto invalid;
  if (inherit) start_with(id, token, flags, cwd, file, argv, argc, environ);
  else start(id, token, flags, cwd, file, argv, argc, envp, envc);
  return;
invalid:
  printf("F %ld %d\n", id, EINVAL);
}

static void start(long id, const char *token, int flags, const char *cwd, char *file, char **argv, int argc, char **envp, int envc) {
  /* execvp wants the list NULL-terminated. */
  char **env = calloc(envc + 1, sizeof *env);
  if (!env) abort();
  memcpy(env, envp, envc * sizeof *env);
  start_with(id, token, flags, cwd, file, argv, argc, env);
  free(env);
}

static void start_with(long id, const char *token, int flags, const char *cwd, char *file, char **argv, int argc, char **env) {
  char **args = calloc(argc + 1, sizeof *args);
  if (!args) abort();
  memcpy(args, argv, argc * sizeof *args);
  start_child(id, token, flags, cwd, file, args, env);
  free(args);
}

static void start_child(long id, const char *token, int flags, const char *cwd, char *file, char **args, char **env) {
  int fds[3] = {-1, -1, -1};
  for (int i = 0; i < 3; i++) {
    fds[i] = connect_back(token, i);
    if (fds[i] < 0) {
      int e = errno;
      for (int j = 0; j < i; j++) close(fds[j]);
      printf("F %ld %d\n", id, e);
      return;
    }
  }
  int report[2];
  if (pipe2(report, O_CLOEXEC) < 0) {
    printf("F %ld %d\n", id, errno);
    for (int i = 0; i < 3; i++) close(fds[i]);
    return;
  }
  pid_t pid = fork();
  if (pid == 0) exec_child(fds, report[1], flags, cwd, file, args, env);
  int fork_errno = errno;
  close(report[1]);
  for (int i = 0; i < 3; i++) close(fds[i]);
  if (pid < 0) {
    close(report[0]);
    printf("F %ld %d\n", id, fork_errno);
    return;
  }
  int e = 0;
  ssize_t got;
  do got = read(report[0], &e, sizeof e); while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == sizeof e) {
    /* Exec failed: the child is reaped here, and only the failure is told. */
    waitpid(pid, NULL, 0);
    printf("F %ld %d\n", id, e);
    return;
  }
  if (child_count == child_cap) {
    child_cap = child_cap ? child_cap * 2 : 64;
    children = realloc(children, child_cap * sizeof *children);
    if (!children) abort();
  }
  children[child_count++] = (struct child){pid, id};
  printf("P %ld %d\n", id, pid);
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (size_t i = 0; i < child_count; i++) {
      if (children[i].pid != pid) continue;
      if (WIFEXITED(status)) printf("X %ld %d 0\n", children[i].id, WEXITSTATUS(status));
      else printf("X %ld -1 %d\n", children[i].id, WTERMSIG(status));
      children[i] = children[--child_count];
      break;
    }
  }
}

int main(int argc, char **argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc != 2 || strlen(argv[1]) / 2 >= sizeof address.sun_path - 1 || unhex(argv[1])) return 2;
  size_t name_len = strlen(argv[1]);
  memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  /* Abstract name: a leading NUL, then the name (not NUL-terminated). */
  memcpy(address.sun_path + 1, argv[1], name_len);
  /* node binds abstract names padded with NULs to the whole address (libuv passes its full size). */
  address_len = sizeof address;

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) return 1;
  signal(SIGPIPE, SIG_IGN);

  char *buffer = NULL;
  size_t used = 0, cap = 0;
  for (;;) {
    struct pollfd p[2] = {{.fd = 0, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (p[1].revents & POLLIN) {
      struct signalfd_siginfo info;
      while (read(sfd, &info, sizeof info) == sizeof info) { /* drained; reap() finds every exit */ }
      reap();
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (cap - used < 65536) {
        cap = cap ? cap * 2 : 131072;
        buffer = realloc(buffer, cap);
        if (!buffer) abort();
      }
      ssize_t n = read(0, buffer + used, cap - used - 1);
      if (n <= 0) return 0;
      used += n;
      char *start = buffer, *nl;
      while ((nl = memchr(start, '\n', buffer + used - start))) {
        *nl = '\0';
        request(start);
        start = nl + 1;
      }
      used -= start - buffer;
      memmove(buffer, start, used);
    }
    if (fflush(stdout) != 0) return 1;
  }
}
