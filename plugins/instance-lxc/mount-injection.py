"""Mounts into a running container's mount namespace (disk hot-plug), run as root on the host.

  attach <pid> <source> <target> <dir|file> <idmap:0|1> <ro:0|1> [propagation]
  detach <pid> <target> [remove]
  batch <json list of the argument lists above>

attach clones `source` as a detached bind mount on the host (open_tree), makes it idmapped
through the container's user namespace when asked (mount_setattr), joins the container's mount
and user namespaces as its root (so the target is made with the container's ids, through its
idmapped rootfs) and attaches the mount there (move_mount). Node has none of these calls.
detach lazily unmounts `target` inside the container's mount namespace; with `remove`, the
empty file left as its mount point goes too (a device node's place in /dev).
Errors go to stderr as one line; the exit code is 1.
batch runs several, in order, each in a child of its own (joining a namespace cannot be undone)
so a node hot-plug of many nodes costs one interpreter start; it prints "done <n>" after each
one that worked and stops at the first that fails.
"""
import json
import ctypes
import errno
import os
import sys

SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
SYS_MOUNT_SETATTR = 442

OPEN_TREE_CLONE = 1
O_CLOEXEC = 0o2000000
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_IDMAP = 0x100000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
CLONE_NEWNS = 0x20000
CLONE_NEWUSER = 0x10000000
MNT_DETACH = 0x2
MS_REC = 0x4000
PROPAGATION = {
    'unbindable': 1 << 17, 'private': 1 << 18, 'slave': 1 << 19, 'shared': 1 << 20,
}

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class MountAttr(ctypes.Structure):
    _fields_ = [('attr_set', ctypes.c_uint64), ('attr_clr', ctypes.c_uint64),
                ('propagation', ctypes.c_uint64), ('userns_fd', ctypes.c_uint64)]


class Failure(Exception):
    pass


def check(ret, what):
    if ret < 0:
        err = ctypes.get_errno()
        raise Failure(f'{what}: {os.strerror(err)} ({errno.errorcode.get(err, err)})')
    return ret


def setns(fd, kind, what):
    check(libc.setns(ctypes.c_int(fd), ctypes.c_int(kind)), f'joining the {what} namespace')


def same_userns(pid):
    return os.stat(f'/proc/{pid}/ns/user').st_ino == os.stat('/proc/self/ns/user').st_ino


def make_target(target, is_file):
    parent = os.path.dirname(target)
    os.makedirs(parent, mode=0o755, exist_ok=True)
    if is_file:
        if not os.path.lexists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
    elif not os.path.isdir(target):
        os.mkdir(target, 0o755)


def attach(pid, source, target, kind, idmap, readonly, propagation):
    tree = check(libc.syscall(ctypes.c_long(SYS_OPEN_TREE), ctypes.c_int(AT_FDCWD), source.encode(),
                              ctypes.c_uint(OPEN_TREE_CLONE | O_CLOEXEC)), f'cloning "{source}"')
    # Read before joining the mount namespace: its /proc is the container's.
    shared = same_userns(pid)
    mapped = idmap and not shared
    userns = os.open(f'/proc/{pid}/ns/user', os.O_RDONLY | os.O_CLOEXEC)
    mntns = os.open(f'/proc/{pid}/ns/mnt', os.O_RDONLY | os.O_CLOEXEC)
    attr = MountAttr(0, 0, 0, 0)
    if mapped:
        attr.attr_set |= MOUNT_ATTR_IDMAP
        attr.userns_fd = userns
    if readonly:
        attr.attr_set |= MOUNT_ATTR_RDONLY
    if attr.attr_set:
        check(libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(tree), b'', ctypes.c_uint(AT_EMPTY_PATH),
                           ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))), 'setting the mount attributes')
    setns(mntns, CLONE_NEWNS, 'mount')
    if not shared:
        # As the container's root: the target is made with its ids, as liblxc makes them at start.
        setns(userns, CLONE_NEWUSER, 'user')
        try:
            os.setgroups([])
        except OSError:
            pass
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
    try:
        make_target(target, kind == 'file')
    except OSError as err:
        raise Failure(f'making the mount point "{target}" in the container: {err.strerror}')
    check(libc.syscall(ctypes.c_long(SYS_MOVE_MOUNT), ctypes.c_int(tree), b'', ctypes.c_int(AT_FDCWD), target.encode(),
                       ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH)), f'mounting at "{target}" in the container')
    if propagation:
        flags = PROPAGATION[propagation.lstrip('r')] | (MS_REC if propagation.startswith('r') else 0)
        check(libc.mount(None, target.encode(), None, ctypes.c_ulong(flags), None), f'setting propagation "{propagation}"')


def detach(pid, target, remove=False):
    mntns = os.open(f'/proc/{pid}/ns/mnt', os.O_RDONLY | os.O_CLOEXEC)
    setns(mntns, CLONE_NEWNS, 'mount')
    ret = libc.umount2(target.encode(), ctypes.c_int(MNT_DETACH))
    # Not mounted (any more) or gone: nothing left to undo.
    if ret < 0 and ctypes.get_errno() not in (errno.EINVAL, errno.ENOENT):
        check(ret, f'unmounting "{target}" in the container')
    if remove:
        # Only the empty regular file made as mount point; setns put us at the container's root.
        try:
            st = os.lstat(target)
            if (st.st_mode & 0o170000) == 0o100000 and st.st_size == 0:
                os.unlink(target)
        except OSError:
            pass


def batch(ops):
    for index, op in enumerate(ops):
        child = os.fork()
        if child == 0:
            code = 1
            try:
                code = run_one([str(a) for a in op])
            finally:
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(child, 0)
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            return 1
        print(f'done {index + 1}', flush=True)
    return 0


def run_one(argv):
    try:
        if len(argv) >= 7 and argv[0] == 'attach':
            attach(int(argv[1]), argv[2], argv[3], argv[4], argv[5] == '1', argv[6] == '1', argv[7] if len(argv) > 7 else '')
        elif len(argv) in (3, 4) and argv[0] == 'detach':
            detach(int(argv[1]), argv[2], len(argv) == 4 and argv[3] == 'remove')
        else:
            raise Failure('usage: attach <pid> <source> <target> <dir|file> <idmap> <ro> [propagation] | detach <pid> <target> [remove]')
    except Failure as err:
        print(err, file=sys.stderr, flush=True)
        return 1
    except OSError as err:
        print(f'{argv[0]}: {err.strerror}', file=sys.stderr, flush=True)
        return 1
    return 0


def main(argv):
    if len(argv) == 2 and argv[0] == 'batch':
        return batch(json.loads(argv[1]))
    return run_one(argv)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
