#!/usr/bin/env python3
"""make bench-p4: packets/s through one BMv2 running coflow.p4 vs the minimal l3fwd.p4.

Same simple_switch_grpc binary and options (--priority-queues 8, no logging), same traffic
(a tagged 256-byte UDP frame of one coflow: the coflow pipeline does its full per-packet work:
parse the option, count bytes, D-CLAS range lookup, stamp, checksum), measured in one run,
alternating the programs ROUNDS times. A raw-socket sender in the namespace offers more than
BMv2 can forward; the forwarding rate is the receive counter of the output veth over a fixed
window after a warm-up. Prints both rates and the ratio (target >= 0.85). A benchmark, not a
test: it fails only if nothing was forwarded.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "controller"))
sys.path.insert(0, os.path.join(ROOT, "ptf-tests"))

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

from runner import Testbed  # noqa: E402

SENDER = r"""
import socket, sys, time
from scapy.all import Ether, IP, UDP, Raw, raw
sys.path.insert(0, %(controller)r)
from coflow.dataplane.packet import CoflowId, coflow_option
p = Ether(src="00:bb:00:00:00:01", dst="00:aa:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.1.1",
    options=[coflow_option(CoflowId(7, 1))]) / UDP(sport=1234, dport=80)
data = raw(p / Raw(b"\0" * (256 - len(p))))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("h0", 0))
end = time.time() + %(seconds)f
n = 0
while time.time() < end:
    for _ in range(64):
        try:
            s.send(data)
            n += 1
        except OSError:
            time.sleep(0.0005)
print(n)
"""


def rx_packets(tb: Testbed, dev: str) -> int:
    r = subprocess.run(tb.nsexec("cat", f"/sys/class/net/{dev}/statistics/rx_packets"),
                       capture_output=True, text=True, check=True)
    return int(r.stdout)


def program_entries(name: str, c):
    if name == "l3fwd":
        c.insert(c.table_entry("ipv4_lpm", {"hdr.ipv4.dst_addr": ("10.0.1.0", 24)}, "forward",
                               {"port": 1, "smac": "00:aa:00:00:00:01",
                                "dmac": "00:bb:00:00:00:02"}))
        return
    from coflow.dataplane.packet import CoflowId
    from coflow.params import DclasParams, hw_priority
    c.insert(c.member("ecmp_selector", 1, "set_next_hop",
                      {"port": 1, "smac": "00:aa:00:00:00:01", "dmac": "00:bb:00:00:00:02"}))
    c.insert(c.table_entry("routing_v4", {"ipv4_dst": ("10.0.1.0", 24)}, member_id=1))
    for lo, hi, q in DclasParams(K=8).ranges():
        c.insert(c.table_entry("dclas_thresholds", {"bytes": (lo, hi)}, "dclas.set_queue",
                               {"prio": hw_priority(q)}, priority=1))
    cid = CoflowId(7, 1)
    c.insert(c.table_entry("coflow_slot", {"external_id": cid.external,
                                           "internal_id": cid.internal},
                           "set_slot", {"slot": 1}))


def measure(name, bmv2_json, p4info, seconds, warmup, log_dir) -> float:
    from coflow.dataplane.p4rt import P4RuntimeClient
    tb = Testbed("coflow-bench", 2, 9560, log_dir, switch_log_level="off")
    with tb:
        tb.push_pipeline(p4info, bmv2_json)
        code = ("import sys; sys.path.insert(0, %r); sys.path.insert(0, %r)\n"
                "import bench_p4\n"
                "from coflow.dataplane.p4rt import P4RuntimeClient\n"
                "c = P4RuntimeClient(%r, 0, 1); c.connect(); c.load_p4info(%r)\n"
                "bench_p4.program_entries(%r, c); c.close()\n"
                % (os.path.join(ROOT, "controller"), HERE, tb.grpc_addr, p4info, name))
        subprocess.run(tb.nsexec(sys.executable, "-c", code), check=True,
                       env=dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python"))
        # rename to the names the sender uses
        sender = subprocess.Popen(
            tb.nsexec(sys.executable, "-c", SENDER.replace("h0", tb.hostport(0)) % {
                "controller": os.path.join(ROOT, "controller"), "seconds": warmup + seconds}),
            stdout=subprocess.PIPE, text=True)
        time.sleep(warmup)
        r0, t0 = rx_packets(tb, tb.hostport(1)), time.time()
        time.sleep(seconds)
        r1, t1 = rx_packets(tb, tb.hostport(1)), time.time()
        offered = int(sender.communicate(timeout=30)[0].strip() or 0)
    rate = (r1 - r0) / (t1 - t0)
    print(f"  {name:6s}: {rate:9.0f} pkt/s forwarded (sender offered {offered / (warmup + seconds):.0f} pkt/s)")
    return rate


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coflow", required=True)
    ap.add_argument("--coflow-p4info", required=True)
    ap.add_argument("--l3fwd", required=True)
    ap.add_argument("--l3fwd-p4info", required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--log-dir", default=os.path.join(ROOT, "build", "bench-p4"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_p4.py needs root (network namespace, veths)", file=sys.stderr)
        return 2
    rates = {"l3fwd": [], "coflow": []}
    progs = {"l3fwd": (os.path.abspath(args.l3fwd), os.path.abspath(args.l3fwd_p4info)),
             "coflow": (os.path.abspath(args.coflow), os.path.abspath(args.coflow_p4info))}
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}")
        for name in ("l3fwd", "coflow"):
            rates[name].append(measure(name, *progs[name], args.seconds, args.warmup,
                                       args.log_dir))
    base = statistics.median(rates["l3fwd"])
    ours = statistics.median(rates["coflow"])
    if base <= 0 or ours <= 0:
        print("bench-p4: nothing was forwarded", file=sys.stderr)
        return 1
    print(f"bench-p4: l3fwd {base:.0f} pkt/s, coflow {ours:.0f} pkt/s (medians of {args.rounds}), "
          f"ratio {ours / base:.2f}x (target >= 0.85x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
