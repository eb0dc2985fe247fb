# Run inside a corral container (busybox sh, as its root): start a real liblxc container nested in it,
# with its own user namespace (container ids 0-65535 mapped to 100000-165535 of this container), using
# the host's lxc tools from the host root the test binds read-only at /host. Prints the nested
# container's proof line: its hostname, its pid and its uid map.
set -e
# Busybox init mounts no cgroups and liblxc leaves them to the init under a cgroup namespace.
mount -t tmpfs cgroup /sys/fs/cgroup
for c in $(sed -n 's/^[0-9]*:\([^:]*\):.*/\1/p' /proc/self/cgroup | tr ',' ' '); do
  case $c in name=*) d=${c#name=}; o="none,$c" ;; *) d=$c; o=$c ;; esac
  mkdir -p /sys/fs/cgroup/$d
  mount -t cgroup -o $o cgroup /sys/fs/cgroup/$d
done
mkdir -p /sys/fs/cgroup/unified
mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
R=/host
mount --rbind /proc $R/proc
mount --rbind /sys $R/sys
mount --rbind /dev $R/dev
mount -t tmpfs tmp $R/tmp
mount -t tmpfs run $R/run
mkdir -p $R/tmp/nr/bin $R/tmp/nr/proc $R/tmp/nr/sys $R/tmp/nr/dev $R/tmp/nr/tmp $R/tmp/lxcp/n1
cp /bin/busybox $R/tmp/nr/bin/busybox
for a in sh hostname cat; do ln -s busybox $R/tmp/nr/bin/$a; done
printf '%s\n' 'echo "nested $(hostname) pid $$ map $(cat /proc/self/uid_map)" > /proof' > $R/tmp/nr/proof.sh
chown -R 100000:100000 $R/tmp/nr
cat > $R/tmp/lxcp/n1/config <<CONF
lxc.uts.name = u5nested
lxc.rootfs.path = dir:/tmp/nr
lxc.idmap = u 0 100000 65536
lxc.idmap = g 0 100000 65536
lxc.mount.auto = proc:mixed sys:mixed
lxc.autodev = 1
lxc.net.0.type = empty
lxc.apparmor.profile = unconfined
lxc.log.file = /tmp/n1.log
lxc.log.level = warn
CONF
# pivot_root (not chroot) into the host root: liblxc pivots into the rootfs and needs a mount as root.
unshare -m sh -c "cd $R && pivot_root . mnt && exec /usr/sbin/chroot . lxc-start -n n1 -P /tmp/lxcp -F -- /bin/sh /proof.sh" </dev/null \
  || { echo "nested start failed"; grep ERROR $R/tmp/n1.log | tail -5; exit 1; }
cat $R/tmp/nr/proof
