"""What the live tests against BMv2 share: the compiled pipeline's paths and the skip marks
(each says why, and the run's skip summary counts it)."""
import os

import pytest

from coflow.dataplane import toolchain

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(REPO, "build", "coflow.json")


def fabric_marks() -> list:
    """Marks of a live test that builds a BMv2 fabric in a namespace of its own (needs root)."""
    return [
        pytest.mark.live, pytest.mark.root,
        pytest.mark.skipif(not toolchain.discover().simple_switch_grpc,
                           reason="ctl live tests: simple_switch_grpc not found (toolchain.discover())"),
        pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                           reason="ctl live tests: build/coflow.json missing (run `make p4`)"),
        pytest.mark.skipif(os.geteuid() != 0, reason="ctl live fabric tests need root (netns, veths)"),
    ]


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
