"""What the live tests against BMv2 share: the compiled pipeline's paths and the skip marks
(each says why, and the run's skip summary counts it)."""
import json
import os
import sys
import time

import pytest

from coflow.dataplane import toolchain

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(REPO, "build", "coflow.json")


def bmv2_marks() -> list:
    """Marks of a live test that talks P4Runtime to BMv2 processes with no ports (no root)."""
    return [
        pytest.mark.live,
        pytest.mark.skipif(not toolchain.discover().simple_switch_grpc,
                           reason="ctl live tests: simple_switch_grpc not found (toolchain.discover())"),
        pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                           reason="ctl live tests: build/coflow.json missing (run `make p4`)"),
    ]


def fabric_marks() -> list:
    """Marks of a live test that builds a BMv2 fabric in a namespace of its own (needs root)."""
    return bmv2_marks() + [
        pytest.mark.root,
        pytest.mark.skipif(os.geteuid() != 0, reason="ctl live fabric tests need root (netns, veths)"),
    ]


def _why_no_emulation():
    from coflow.emu.cli import preflight   # the same check as `coflow run`: every reason at once
    why = preflight()
    if why:
        return why
    from coflow import topology as topo
    from coflow.emu.fabric import conflicting_interfaces
    if conflicting_interfaces(topo.fattree(4)):
        return "another k=4 fat-tree is up in this namespace (its interfaces exist)"
    return None


def emu_marks() -> list:
    """Marks of a live test that runs the Mininet emulation of a k=4 fat-tree (root, Mininet, P4)."""
    why = _why_no_emulation()
    return [pytest.mark.live, pytest.mark.root, pytest.mark.slow,
            pytest.mark.skipif(why is not None, reason=f"emulation test skipped: {why}")]


# Run inside a test's namespace (python -c IO_SCRIPT, request as JSON on stdin): send frames paced ``gap`` s apart, report when the first and the
# last left, and what each listed interface received within the timeout.
IO_SCRIPT = r"""
import json, socket, sys, time, select
req = json.load(sys.stdin)
socks = {}
for intf in req["recv"]:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((intf, 0)); s.setblocking(False); socks[intf] = s
tx = {}
t_first = t_last = None
for intf, frame in req["send"]:
    if intf not in tx:
        tx[intf] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx[intf].bind((intf, 0))
    tx[intf].send(bytes.fromhex(frame))
    t_last = time.time()
    t_first = t_first or t_last
    time.sleep(req["gap"])
got = {i: [] for i in socks}
deadline = time.time() + req["timeout"]
while time.time() < deadline:
    r, _, _ = select.select(list(socks.values()), [], [], max(0.0, deadline - time.time()))
    for intf, s in socks.items():
        if s in r:
            while True:
                try:
                    data, addr = s.recvfrom(4096)
                except BlockingIOError:
                    break
                if addr[2] != socket.PACKET_OUTGOING:
                    got[intf].append(data.hex())
    if req.get("expect") and sum(len(v) for v in got.values()) >= req["expect"]:
        break
print(json.dumps({"got": got, "sent_s": (t_last - t_first) if t_first else 0.0}))
"""


def io(fab, send, recv, timeout=1.0, expect=None, gap=0.0012):
    """Run IO_SCRIPT in ``fab``'s namespaces: send ``[(interface, frame bytes)]`` ``gap`` s apart,
    capture what the ``recv`` interfaces get (until ``expect`` frames or ``timeout``).  Returns
    ({interface: [scapy Ether]}, seconds between the first and the last frame sent)."""
    r = fab.exec(sys.executable, "-c", IO_SCRIPT,
                 input=json.dumps({"send": [(i, f.hex()) for i, f in send], "recv": recv,
                                   "timeout": timeout, "expect": expect, "gap": gap}))
    assert r.returncode == 0, r.stderr
    from scapy.all import Ether
    out = json.loads(r.stdout)
    return {i: [Ether(bytes.fromhex(x)) for x in v] for i, v in out["got"].items()}, out["sent_s"]


def prio_of(pkt) -> int:
    """The priority class a switch wrote into a frame's IPv4 DSCP (its top 3 bits of ToS)."""
    from scapy.all import IP
    return pkt[IP].tos >> 5


def offset_ids(t, k):
    """``t`` with every switch's device id moved by ``k`` (tests that run at once don't share ids)."""
    from dataclasses import replace
    from coflow.topology import Topology
    return Topology(t.name, t.kind, t.params, t.hosts,
                    [replace(s, device_id=s.device_id + k) for s in t.switches], t.links)


def wait_for(pred, timeout=5.0, step=0.005) -> bool:
    """Poll ``pred`` until it holds (True) or ``timeout`` s pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return False


def fabric_of(t, base: int):
    """Yield (topology, running BMv2 Fabric) for ``t`` with device ids moved past ``base`` (per
    process), stopped afterwards: the body of a module-scoped ``fabric`` fixture."""
    from coflow.ctl.bmv2 import Fabric
    t = offset_ids(t, base + os.getpid() % 1000 * 10)
    with Fabric(t) as f:
        yield t, f
