/*
 * corral-agent: runs inside a VM and serves the daemon's exec, file and state requests over one
 * virtio-serial port (docs/decisions/0048-vm-guest-agent.md). It never exits on the daemon going
 * away or on a bad frame: it waits for the next greeting.
 *
 *   corral-agent                    find the port named org.corral.agent in /sys/class/virtio-ports
 *   corral-agent --port /dev/vport  use that port device
 *   corral-agent --connect SOCKET   connect to a unix socket instead (tests on the host)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "channel.h"
#include "exec.h"
#include "files.h"
#include "link.h"

#define PORT_NAME "org.corral.agent"
/* How often a missing port, a hung-up port or a refused socket is tried again. */
#define RETRY_MS 100

static int child_pipe[2];

static void on_child(int sig) {
	int saved = errno;
	(void)sig;
	if (write(child_pipe[1], "c", 1) < 0) { /* full: a wake-up is already pending */ }
	errno = saved;
}

/* /dev/<vportNpM> whose /sys/class/virtio-ports/<vportNpM>/name is PORT_NAME. */
static int find_port(char *out, size_t size) {
	char path[300], name[64];
	struct dirent *entry;
	int found = 0;
	DIR *ports = opendir("/sys/class/virtio-ports");
	if (!ports) return 0;
	while (!found && (entry = readdir(ports))) {
		FILE *f;
		if (entry->d_name[0] == '.') continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", entry->d_name);
		if (!(f = fopen(path, "re"))) continue;
		if (fgets(name, sizeof(name), f) && !strncmp(name, PORT_NAME, strlen(PORT_NAME)) &&
		    (name[strlen(PORT_NAME)] == '\n' || !name[strlen(PORT_NAME)])) {
			snprintf(out, size, "/dev/%s", entry->d_name);
			found = 1;
		}
		fclose(f);
	}
	closedir(ports);
	return found;
}

enum watch_role { WATCH_CHILD, WATCH_LINK, WATCH_OUT, WATCH_ERR, WATCH_IN };
struct watch {
	enum watch_role role;
	struct channel *channel;
};

/* Regular files and directories are always ready: they are pumped without poll. */
static int pump_files(void) {
	int busy = 0;
	for (int i = 0; i < MAX_CHANNELS && link_ready(); i++) {
		struct channel *c = &channels[i];
		if (c->kind == CHANNEL_READ && c->out_credit[0] > 0) {
			channel_pump_output(c, 0);
			if (c->out_fd[0] < 0) channel_close(c);
			else busy |= c->out_credit[0] > 0;
		} else if (c->kind == CHANNEL_LIST && c->out_credit[0] >= 512) {
			files_pump_list(c);
			busy |= c->kind == CHANNEL_LIST && c->out_credit[0] >= 512;
		}
	}
	return busy;
}

static void serve(void) {
	struct pollfd fds[2 + 3 * MAX_CHANNELS];
	struct watch watches[2 + 3 * MAX_CHANNELS];
	for (;;) {
		int n = 0, timeout = -1, waiting_exit = 0;
		link_poll_state();
		fds[n] = (struct pollfd){ .fd = child_pipe[0], .events = POLLIN };
		watches[n++] = (struct watch){ WATCH_CHILD, NULL };
		if (daemon_link.fd >= 0 && daemon_link.up) {
			fds[n] = (struct pollfd){ .fd = daemon_link.fd, .events = POLLIN | (buffer_length(&daemon_link.out) ? POLLOUT : 0) };
			watches[n++] = (struct watch){ WATCH_LINK, NULL };
		} else {
			timeout = RETRY_MS;
		}
		for (int i = 0; i < MAX_CHANNELS; i++) {
			struct channel *c = &channels[i];
			if (c->kind != CHANNEL_EXEC) continue;
			if (c->exited) waiting_exit = 1;
			if (link_ready()) {
				if (c->out_fd[0] >= 0 && c->out_credit[0] > 0) {
					fds[n] = (struct pollfd){ .fd = c->out_fd[0], .events = POLLIN };
					watches[n++] = (struct watch){ WATCH_OUT, c };
				}
				if (c->out_fd[1] >= 0 && c->out_credit[1] > 0) {
					fds[n] = (struct pollfd){ .fd = c->out_fd[1], .events = POLLIN };
					watches[n++] = (struct watch){ WATCH_ERR, c };
				}
			}
			if (c->in_fd >= 0 && buffer_length(&c->in_pending)) {
				fds[n] = (struct pollfd){ .fd = c->in_fd, .events = POLLOUT };
				watches[n++] = (struct watch){ WATCH_IN, c };
			}
		}
		if (waiting_exit && (timeout < 0 || timeout > 50)) timeout = 50;
		if (pump_files()) timeout = 0;

		if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR) continue;
		for (int i = 0; i < n; i++) {
			struct channel *c = watches[i].channel;
			if (!fds[i].revents) continue;
			switch (watches[i].role) {
			case WATCH_CHILD: {
				char drain[64];
				while (read(child_pipe[0], drain, sizeof(drain)) > 0) {}
				exec_reap();
				break;
			}
			case WATCH_LINK:
				if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) link_read();
				if (daemon_link.up && (fds[i].revents & POLLOUT)) link_flush();
				break;
			case WATCH_OUT:
			case WATCH_ERR:
				/* The channel may have been closed by a frame handled above. */
				if (c->kind == CHANNEL_EXEC && channel_pump_output(c, watches[i].role == WATCH_OUT ? 0 : 1))
					c->quiet_since = monotonic_ms();
				break;
			case WATCH_IN:
				if (c->kind == CHANNEL_EXEC) channel_pump_input(c);
				break;
			}
		}
		for (int i = 0; i < MAX_CHANNELS; i++)
			if (channels[i].kind == CHANNEL_EXEC && link_ready()) exec_finish(&channels[i]);
		link_flush();
	}
}

int main(int argc, char **argv) {
	static char port[300];
	struct sigaction child = { .sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP };
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--connect") && i + 1 < argc) {
			daemon_link.socket_mode = 1;
			daemon_link.path = argv[++i];
		} else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
			daemon_link.path = argv[++i];
		} else {
			fprintf(stderr, "usage: %s [--port DEVICE | --connect SOCKET]\n", argv[0]);
			return 2;
		}
	}
	if (pipe2(child_pipe, O_CLOEXEC | O_NONBLOCK) < 0) return 1;
	sigaction(SIGCHLD, &child, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Modes asked for are the modes given. */
	umask(0);
	while (!daemon_link.path) {
		if (find_port(port, sizeof(port))) daemon_link.path = port;
		else usleep(RETRY_MS * 1000);
	}
	serve();
	return 0;
}
