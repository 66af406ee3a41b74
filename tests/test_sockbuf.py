"""coflow.dataplane.sockbuf: another process's sockets get a larger send buffer.

A child process holds the sockets and reports their SO_SNDBUF as it sees it, so a change made
only to this process's duplicate (or to the wrong socket) fails here."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from coflow.dataplane import sockbuf

CHILD = r"""
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
print(u.fileno(), t.fileno(), flush=True)
print(u.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
      t.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), flush=True)
sys.stdin.readline()
print(u.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
      t.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), flush=True)
"""

needs_admin = pytest.mark.skipif(os.geteuid() != 0, reason="SO_SNDBUFFORCE needs CAP_NET_ADMIN (root)")


@pytest.fixture
def child():
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    fds = [int(x) for x in p.stdout.readline().split()]
    p.initial = [int(x) for x in p.stdout.readline().split()]
    yield p, fds

    p.kill()
    p.wait()


def child_sndbufs(p) -> list[int]:
    p.stdin.write("\n")
    p.stdin.flush()
    return [int(x) for x in p.stdout.readline().split()]


def test_socket_fds_lists_the_childs_sockets(child):
    p, (udp, tcp6) = child
    assert {udp, tcp6} <= set(sockbuf.socket_fds(p.pid))
    assert 0 not in sockbuf.socket_fds(p.pid)          # stdin is a pipe


@needs_admin
def test_raises_only_the_sockets_of_the_family_in_the_other_process(child):
    p, (udp, tcp6) = child
    want = 4 << 20
    assert 2 * want > max(p.initial)
    changed = sockbuf.raise_sndbuf(p.pid, want, family=socket.AF_INET)
    assert changed == [(udp, 2 * want)]                 # the kernel doubles it
    u, t = child_sndbufs(p)
    assert u == 2 * want                                # the child's own socket changed
    assert t == p.initial[1]                            # the other family's did not


@needs_admin
def test_packet_sockets_are_the_default_family(child):
    p, _ = child
    assert sockbuf.raise_sndbuf(p.pid, 1 << 20) == []   # the child holds no AF_PACKET socket


def test_errors():
    with pytest.raises(ValueError):
        sockbuf.raise_sndbuf(os.getpid(), 0)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with pytest.raises(sockbuf.SockBufError):
        sockbuf.raise_sndbuf(dead.pid, 1 << 20)
