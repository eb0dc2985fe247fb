#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include "errors.h"
#include "exec.h"
#include "kv.h"
#include "link.h"

extern char **environ;

/*
 * After the command exits, output still open (a background child holds it) but quiet for this
 * long is closed, so the exit is not held up forever.
 */
#define QUIET_AFTER_EXIT_MS 300

struct strings {
	char **items;
	size_t count;
};

static void collect(const char *value, void *arg) {
	struct strings *s = arg;
	s->items[s->count++] = (char *)value;
}

static char **all_values(const unsigned char *payload, size_t len, const char *key) {
	struct strings s = { 0 };
	size_t n = kv_each(payload, len, key, NULL, NULL);
	s.items = calloc(n + 1, sizeof(char *));
	if (s.items) kv_each(payload, len, key, collect, &s);
	return s.items;
}

static void nonblocking(int fd) {
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* In the child: never returns. */
static void run_command(char **argv, char **envp, const char *cwd, long long uid, long long gid) {
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	if (gid >= 0 && (setgroups(0, NULL) < 0 || setgid((gid_t)gid) < 0)) _exit(126);
	if (uid >= 0 && setuid((uid_t)uid) < 0) _exit(126);
	/* A missing working directory falls back to `/`, as for containers. */
	if (!cwd || chdir(cwd) < 0) chdir("/");
	environ = envp;
	execvp(argv[0], argv);
	_exit(errno == ENOENT ? 127 : 126);
}

int exec_start(struct channel *c, const unsigned char *payload, size_t len, struct buffer *reply) {
	char **argv = all_values(payload, len, "arg");
	char **envp = all_values(payload, len, "env");
	const char *cwd = kv_get(payload, len, "cwd");
	long long uid = kv_number(payload, len, "uid", -1), gid = kv_number(payload, len, "gid", -1);
	int pty = kv_number(payload, len, "pty", 0) == 1;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, master = -1;
	char *slave_name = NULL;
	pid_t pid;

	if (!argv || !envp || !argv[0]) {
		free(argv);
		free(envp);
		return reply_error(reply, EINVAL, "no command");
	}
	if (pty) {
		struct winsize size = { .ws_col = (unsigned short)kv_number(payload, len, "cols", 80),
		                        .ws_row = (unsigned short)kv_number(payload, len, "rows", 25) };
		master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 || !(slave_name = ptsname(master))) goto failed;
		ioctl(master, TIOCSWINSZ, &size);
	} else if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		goto failed;
	}

	pid = fork();
	if (pid < 0) goto failed;
	if (pid == 0) {
		/* Its own session (and process group), so that terminate reaches all it starts. */
		setsid();
		if (pty) {
			int slave = open(slave_name, O_RDWR);
			if (slave < 0) _exit(126);
			ioctl(slave, TIOCSCTTY, 0);
			dup2(slave, 0);
			dup2(slave, 1);
			dup2(slave, 2);
			if (slave > 2) close(slave);
		} else {
			dup2(in[0], 0);
			dup2(out[1], 1);
			dup2(err[1], 2);
		}
		run_command(argv, envp, cwd, uid, gid);
	}

	free(argv);
	free(envp);
	c->pid = pid;
	c->pty = pty;
	if (pty) {
		nonblocking(master);
		c->out_fd[0] = master;
		c->in_fd = dup(master);
		nonblocking(c->in_fd);
	} else {
		close(in[0]);
		close(out[1]);
		close(err[1]);
		nonblocking(in[1]);
		nonblocking(out[0]);
		nonblocking(err[0]);
		c->in_fd = in[1];
		c->out_fd[0] = out[0];
		c->out_fd[1] = err[0];
	}
	kv_putf(reply, "pid", "%d", (int)pid);
	return 0;

failed: {
		int saved = errno;
		int fds[] = { in[0], in[1], out[0], out[1], err[0], err[1], master };
		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			if (fds[i] >= 0) close(fds[i]);
		free(argv);
		free(envp);
		return reply_error(reply, saved, "cannot start the command");
	}
}

void exec_signal(struct channel *c, int signal) {
	if (!c->exited && c->pid > 0 && signal > 0 && signal < 65) kill(c->pid, signal);
}

void exec_resize(struct channel *c, unsigned cols, unsigned rows) {
	struct winsize size = { .ws_col = (unsigned short)cols, .ws_row = (unsigned short)rows };
	if (c->pty && c->out_fd[0] >= 0) ioctl(c->out_fd[0], TIOCSWINSZ, &size);
	else if (c->pty && c->in_fd >= 0) ioctl(c->in_fd, TIOCSWINSZ, &size);
}

void exec_reap(void) {
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (int i = 0; i < MAX_CHANNELS; i++) {
			struct channel *c = &channels[i];
			if (c->kind != CHANNEL_EXEC || c->pid != pid) continue;
			c->exited = 1;
			c->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			c->quiet_since = monotonic_ms();
		}
	}
}

void exec_finish(struct channel *c) {
	unsigned char status[4];
	if (c->kind != CHANNEL_EXEC || !c->exited) return;
	if (c->out_fd[0] >= 0 || c->out_fd[1] >= 0) {
		/* Output still open: close it once quiet (and not merely waiting for the daemon's credit). */
		int waiting_for_credit = (c->out_fd[0] >= 0 && c->out_credit[0] <= 0) || (c->out_fd[1] >= 0 && c->out_credit[1] <= 0);
		if (waiting_for_credit || monotonic_ms() - c->quiet_since < QUIET_AFTER_EXIT_MS) return;
		/* Whatever is still readable goes first. */
		for (int s = 0; s < 2; s++) {
			while (c->out_fd[s] >= 0 && c->out_credit[s] > 0 && channel_pump_output(c, s)) {}
			if (c->out_fd[s] >= 0 && c->out_credit[s] <= 0) return;
			channel_end_output(c, s);
		}
	}
	put_u32(status, (uint32_t)c->status);
	link_send(c->id, FRAME_EXIT, status, sizeof(status), NULL, 0);
	channel_close(c);
}
