"""Give another process's sockets a larger send buffer (``pidfd_getfd`` + ``SO_SNDBUFFORCE``).

Why this exists: BMv2 transmits each port's frames through a libpcap ``AF_PACKET`` socket, and
a frame counts against that socket's send buffer until it is freed, which on Linux is after it
has left every qdisc on its way (a veth crossing, even into another namespace, keeps the charge:
measured on this kernel, 95 MTU frames into an HTB behind one veth and one tc redirect, then
``EAGAIN``). So the emulated traffic manager's queues, which sit on the switch's egress veth, can
hold only ``net.core.wmem_default`` bytes per port (208 KiB: about 90 MTU frames at their true
size); past that, BMv2's single transmit thread blocks and every port of the switch stalls.
BMv2 has no option for the socket's buffer, ``wmem_default`` is machine-wide (read-only in a
child network namespace on this kernel), and the emulation must not change the machine. So the
emulation raises the buffer of the switch's own sockets from outside: ``pidfd_getfd(2)``
(Linux 5.6) duplicates the socket into this process, ``setsockopt(SO_SNDBUFFORCE)`` (which
needs CAP_NET_ADMIN and ignores ``wmem_max``) sets the buffer of the socket itself, shared by
both descriptors, and the duplicate is closed. Nothing else of the process is touched.
"""
from __future__ import annotations

import ctypes
import errno
import os
import socket

SYS_PIDFD_OPEN = 434
SYS_PIDFD_GETFD = 438
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)

_libc = ctypes.CDLL(None, use_errno=True)


class SockBufError(OSError):
    pass


def _syscall(nr: int, *args: int) -> int:
    r = _libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    if r < 0:
        e = ctypes.get_errno()
        raise SockBufError(e, f"syscall {nr}: {os.strerror(e)}")
    return r


def socket_fds(pid: int) -> list[int]:
    """The descriptor numbers of ``pid`` that are sockets (from /proc/PID/fd)."""
    out = []
    base = f"/proc/{pid}/fd"
    for name in os.listdir(base):
        try:
            if os.readlink(os.path.join(base, name)).startswith("socket:"):
                out.append(int(name))
        except OSError:       # closed meanwhile
            continue
    return sorted(out)


def raise_sndbuf(pid: int, nbytes: int, family: int = socket.AF_PACKET) -> list[tuple[int, int]]:
    """Set ``SO_SNDBUFFORCE = nbytes`` on every socket of ``family`` that process ``pid`` holds.

    Returns ``(fd, sndbuf)`` per socket changed, ``sndbuf`` as read back (the kernel doubles the
    value it is given, for its bookkeeping). Raises :class:`SockBufError` when the process
    cannot be reached (gone, or no ptrace permission) or the option is refused (no
    CAP_NET_ADMIN)."""
    if nbytes <= 0:
        raise ValueError(f"send buffer must be positive, got {nbytes}")
    pidfd = _syscall(SYS_PIDFD_OPEN, pid, 0)
    changed = []
    try:
        for fd in socket_fds(pid):
            try:
                mine = _syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
            except SockBufError as e:
                if e.errno == errno.EBADF:      # closed since the listing
                    continue
                raise
            s = socket.socket(fileno=mine)
            try:
                if s.family != family:
                    continue
                try:
                    s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, nbytes)
                except OSError as e:
                    code = e.errno or errno.EPERM
                    raise SockBufError(code, f"SO_SNDBUFFORCE on fd {fd} of pid {pid}: "
                                       f"{os.strerror(code)}") from None
                changed.append((fd, s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)))
            finally:
                s.close()    # our duplicate only; the process keeps its descriptor
    finally:
        os.close(pidfd)
    return changed
