/*
 * corral-mknod: makes device nodes for the lxc driver (unix-nodes.ts), kept running for the
 * daemon's life so a container start does not pay for a process per node. Reads lines
 *   <mode octal> <c|b> <major> <minor> <uid> <gid> <path>
 * makes each node and gives it the owner; prints "ERR <path>" when it cannot, and "END <n>" for
 * a line "END <n>" (the end of a batch). Exits at the end of its input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int main(void) {
  char line[8192];
  umask(0);
  setvbuf(stdout, NULL, _IOLBF, 0);
  while (fgets(line, sizeof line, stdin)) {
    size_t len = strlen(line);
    if (len && line[len - 1] == '\n') line[--len] = '\0';
    if (strncmp(line, "END ", 4) == 0) {
      printf("%s\n", line);
      continue;
    }
    unsigned mode, major, minor, uid, gid;
    char kind;
    int used = 0;
    if (sscanf(line, "%o %c %u %u %u %u %n", &mode, &kind, &major, &minor, &uid, &gid, &used) != 6 || used == 0 || line[used] == '\0') {
      printf("ERR %s\n", line);
      continue;
    }
    const char *path = line + used;
    mode_t type = kind == 'b' ? S_IFBLK : kind == 'c' ? S_IFCHR : 0;
    if (type == 0 || mknod(path, type | (mode & 07777), makedev(major, minor)) != 0 || chown(path, uid, gid) != 0) {
      printf("ERR %s\n", path);
    }
  }
  return 0;
}
