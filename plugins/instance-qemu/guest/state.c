#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "kv.h"
#include "state.h"

static void put_processes(struct buffer *reply) {
	DIR *proc = opendir("/proc");
	struct dirent *entry;
	unsigned count = 0;
	if (proc) {
		while ((entry = readdir(proc)))
			if (isdigit((unsigned char)entry->d_name[0])) count++;
		closedir(proc);
	}
	kv_putf(reply, "processes", "%u", count);
}

static void put_memory(struct buffer *reply) {
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	unsigned long long total = 0, available = 0, value;
	if (!f) return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemTotal: %llu kB", &value) == 1) total = value * 1024;
		else if (sscanf(line, "MemAvailable: %llu kB", &value) == 1) available = value * 1024;
	}
	fclose(f);
	kv_putf(reply, "memory_total", "%llu", total);
	kv_putf(reply, "memory_usage", "%llu", total > available ? total - available : 0);
}

static void put_cpu(struct buffer *reply) {
	FILE *f = fopen("/proc/stat", "re");
	unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
	long hz = sysconf(_SC_CLK_TCK);
	if (!f) return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait, &irq, &softirq, &steal) < 4) {
		fclose(f);
		return;
	}
	fclose(f);
	if (hz <= 0) hz = 100;
	/* Busy time only: idle and iowait are not the guest's work. */
	kv_putf(reply, "cpu_ns", "%llu", (user + nice + system + irq + softirq + steal) * (1000000000ULL / (unsigned long long)hz));
}

static void read_sys(const char *iface, const char *file, char *out, size_t size) {
	char path[128];
	FILE *f;
	out[0] = 0;
	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", iface, file);
	if (!(f = fopen(path, "re"))) return;
	if (fgets(out, (int)size, f)) out[strcspn(out, "\n")] = 0;
	fclose(f);
}

/* One `net=` entry per interface: name hwaddr mtu state type and the eight counters. */
static void put_interfaces(struct buffer *reply) {
	FILE *f = fopen("/proc/net/dev", "re");
	char line[512];
	if (!f) return;
	while (fgets(line, sizeof(line), f)) {
		char name[IF_NAMESIZE + 1], hwaddr[64], mtu[16], operstate[32];
		unsigned long long rb, rp, re, rd, tb, tp, te, td, skip;
		char *colon = strchr(line, ':');
		if (!colon) continue;
		*colon = 0;
		if (sscanf(line, " %16s", name) != 1) continue;
		if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &rb, &rp, &re, &rd,
		           &skip, &skip, &skip, &skip, &tb, &tp, &te, &td) != 12) continue;
		read_sys(name, "address", hwaddr, sizeof(hwaddr));
		read_sys(name, "mtu", mtu, sizeof(mtu));
		read_sys(name, "operstate", operstate, sizeof(operstate));
		kv_putf(reply, "net", "%s %s %s %s %s %llu %llu %llu %llu %llu %llu %llu %llu", name, hwaddr[0] ? hwaddr : "-",
		        mtu[0] ? mtu : "0", !strcmp(name, "lo") || !strcmp(operstate, "up") || !strcmp(operstate, "unknown") ? "up" : "down",
		        !strcmp(name, "lo") ? "loopback" : "broadcast", rb, rp, re, rd, tb, tp, te, td);
	}
	fclose(f);
}

static int prefix_length(const unsigned char *mask, size_t len) {
	int bits = 0;
	for (size_t i = 0; i < len; i++)
		for (int b = 7; b >= 0; b--) bits += (mask[i] >> b) & 1;
	return bits;
}

/* One `addr=` entry per address: interface family address prefix scope. */
static void put_addresses(struct buffer *reply) {
	struct ifaddrs *all, *a;
	if (getifaddrs(&all) < 0) return;
	for (a = all; a; a = a->ifa_next) {
		char text[INET6_ADDRSTRLEN];
		const char *scope = "global";
		int prefix;
		if (!a->ifa_addr || !a->ifa_netmask) continue;
		if (a->ifa_addr->sa_family == AF_INET) {
			struct in_addr addr = ((struct sockaddr_in *)a->ifa_addr)->sin_addr;
			inet_ntop(AF_INET, &addr, text, sizeof(text));
			prefix = prefix_length((unsigned char *)&((struct sockaddr_in *)a->ifa_netmask)->sin_addr, 4);
			if ((ntohl(addr.s_addr) >> 24) == 127) scope = "local";
			kv_putf(reply, "addr", "%s inet %s %d %s", a->ifa_name, text, prefix, scope);
		} else if (a->ifa_addr->sa_family == AF_INET6) {
			struct in6_addr addr = ((struct sockaddr_in6 *)a->ifa_addr)->sin6_addr;
			inet_ntop(AF_INET6, &addr, text, sizeof(text));
			prefix = prefix_length((unsigned char *)&((struct sockaddr_in6 *)a->ifa_netmask)->sin6_addr, 16);
			if (IN6_IS_ADDR_LOOPBACK(&addr)) scope = "local";
			else if (IN6_IS_ADDR_LINKLOCAL(&addr)) scope = "link";
			kv_putf(reply, "addr", "%s inet6 %s %d %s", a->ifa_name, text, prefix, scope);
		}
	}
	freeifaddrs(all);
}

void state_report(struct buffer *reply) {
	put_processes(reply);
	put_memory(reply);
	put_cpu(reply);
	put_interfaces(reply);
	put_addresses(reply);
}
