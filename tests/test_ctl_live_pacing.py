"""Live (issue 27): a paced and an unpaced TCP flow get the same controller rate; only the
unpaced one is policed.

One BMv2 switch (big switch, 4 hosts), each host a network namespace of its own with a real
Linux TCP stack and the emulation's traffic agent (``coflow.emu.agent``); the controller runs
SEBF with meters at ``meter_headroom`` 0.1 above the rates, and serves the coflow API
(Register waits for the coflow's entries; WatchRates streams its rates). One coflow, two
equal flows on disjoint hosts, h0 -> h1 and h2 -> h3: MADD gives both the whole link. h0's
agent follows the rate stream and paces its socket at its flow's rate; h2's does not. The
switch's counters say what happened at the sender edge: RED drops per meter
(``meter_red_drops``) and the payload that passed (``flow_bytes``).

Needs root and the P4 toolchain; skips loudly otherwise.
"""
import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest

from live import BMV2_JSON, P4INFO, REPO, fabric_marks, offset_ids

pytestmark = fabric_marks()

SIZE = 1_500_000
LINK_MBPS = 4


def _sh(*cmd):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"


class Hosts:
    """The fabric's host ends moved into namespaces of their own, addressed as the topology says."""

    def __init__(self, t, fab):
        self.t, self.fab = t, fab
        self.ns = {h.name: f"cfpace{os.getpid() % 100000}{h.name}" for h in t.hosts}

    def start(self):
        sw_mac = {s.name: s.mac for s in self.t.switches}
        for h in self.t.hosts:
            ns = self.ns[h.name]
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", self.fab.netns, "link", "set", h.intf, "netns", ns)
            _sh("ip", "-n", ns, "link", "set", h.intf, "address", h.mac)
            _sh("ip", "-n", ns, "addr", "add", f"{h.ip}/8", "dev", h.intf)
            _sh("ip", "-n", ns, "link", "set", h.intf, "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", h.intf, "tx", "off", "rx", "off",
                            "sg", "off", "tso", "off", "gso", "off", "gro", "off"], capture_output=True)
            _sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_ecn=1")
            for o in self.t.hosts:
                if o.name != h.name:
                    _sh("ip", "-n", ns, "neigh", "replace", o.ip, "lladdr", sw_mac[h.switch],
                        "dev", h.intf, "nud", "permanent")
        return self

    def stop(self):
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class Agent:
    def __init__(self, hosts, h):
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "controller"))
        self.name = h.name
        self.p = subprocess.Popen(["ip", "netns", "exec", hosts.ns[h.name], sys.executable, "-u", "-m",
                                   "coflow.emu.agent", "--host", h.name, "--listen", f"{h.ip}:5001"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        self.events: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.events.put(json.loads(line))

    def send(self, **cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()

    def wait(self, ev, timeout=20.0, **match):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                e = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if e["ev"] == "error":
                raise AssertionError(f"{self.name}: {e}")
            if e["ev"] == ev and all(e.get(k) == v for k, v in match.items()):
                return e
        raise AssertionError(f"{self.name}: no {ev} {match} in {timeout} s")

    def stop(self):
        try:
            self.send(op="quit")
            self.p.wait(5)
        except Exception:  # noqa: BLE001
            self.p.kill()


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    from coflow import topology as T
    from coflow.ctl.bmv2 import Fabric
    t = offset_ids(T.bigswitch(4), 900 + os.getpid() % 1000 * 10)
    with Fabric(t) as f:
        hosts = Hosts(t, f).start()
        try:
            yield t, f, hosts, tmp_path_factory.mktemp("pacing")
        finally:
            hosts.stop()


def test_paced_flow_loses_nothing_unpaced_one_is_policed(fabric):
    from coflow.api.client import CoflowClient
    from coflow.api.server import serve
    from coflow.ctl import model as M
    from coflow.ctl.daemon import Controller
    t, f, hosts, tmp = fabric
    ctl = Controller(t, "sebf", P4INFO, BMV2_JSON, f.addrs(), settings={
        "link_mbps": str(LINK_MBPS), "progress_s": "0.1", "telemetry_s": "0", "audit_s": "0",
        "meter_headroom": "0.1", "meter_peak_bursts": "4", "rate_audit": "1",
        # a 25 ms round trip's burst: the peak (4 bursts, 48 KB) holds a connection's first
        # 10 segments, which Linux never paces
        "rtt_us": "25000"})
    sock = f"unix:{tmp / 'api.sock'}"
    agents = {}
    server = None
    try:
        ctl.start()
        server = serve(ctl.registry, None, [sock], after_register=lambda r: ctl.wait_installed(r.cid),
                       rates=ctl.rate_board)
        agents = {h.name: Agent(hosts, h) for h in t.hosts}
        for a in agents.values():
            a.wait("ready")
        agents["h0"].send(op="watch", api=sock)            # h0 cooperates; h2 does not
        agents["h0"].wait("watching")
        with CoflowClient(sock) as c:
            cid = c.register([("h0", "h1", SIZE), ("h2", "h3", SIZE)])
            key = tuple(int(x) for x in cid.split("."))
            _, _, snap = ctl.rate_board.snapshot()
            rates = {fr.flow_id: fr for fr in snap[cid].flows}
            # the same controller rate for both, held by a meter: the whole payload link
            assert rates[0].rate_Bps == rates[1].rate_Bps == pytest.approx(ctl.ctl.link_payload_Bps)
            assert rates[0].limited and rates[1].limited
            rate = rates[0].rate_Bps
            meters = {(a, b): (sw, i) for a, b, sw, i in ctl._meter_ctx.flows(key)}
            paced_idx, unpaced_idx = meters[(0, 1)][1], meters[(2, 3)][1]
            client = ctl.agents["s0"].client
            red0 = {i: client.read_counter(M.C_RED_DROPS, i)[1] for i in (paced_idx, unpaced_idx)}
            h = {x.name: x for x in t.hosts}
            t0 = time.time()
            agents["h0"].send(op="send", run=1, coflow=0, flow=0, cid=cid, dst=h["h1"].ip, port=5001, bytes=SIZE)
            agents["h2"].send(op="send", run=1, coflow=0, flow=1, cid=cid, dst=h["h3"].ip, port=5001, bytes=SIZE)
            # the paced flow's progress at its sender edge, from flow_bytes
            samples = []
            while time.time() - t0 < 60:
                b, p = client.read_counter(M.C_FLOW_BYTES, paced_idx)
                samples.append((time.time(), b - p * 74))    # payload bytes (74 B of headers)
                if samples[-1][1] >= SIZE:
                    break
                time.sleep(0.1)
            sent0 = agents["h0"].wait("sent", timeout=60)
            agents["h1"].wait("done", timeout=60)
            agents["h3"].wait("done", timeout=90)
            red = {i: client.read_counter(M.C_RED_DROPS, i)[1] - red0[i] for i in (paced_idx, unpaced_idx)}
            audit = ctl.audit.flows(min_expected=0)     # (achieved, set) per pair: h0's, h2's
            c.unregister(cid)
    finally:
        for a in agents.values():
            a.stop()
        if server is not None:
            server.stop(None)
        ctl.stop()
    # the achieved rate between 20% and 80% of the transfer (past the unpaced first segments)
    lo = next(s for s in samples if s[1] >= 0.2 * SIZE)
    hi = next(s for s in samples if s[1] >= 0.8 * SIZE)
    achieved = (hi[1] - lo[1]) / (hi[0] - lo[0])
    print(f"controller rate {rate:,.0f} B/s; paced flow achieved {achieved:,.0f} B/s "
          f"({achieved / rate:.3f}); RED drops: paced {red[paced_idx]}, unpaced {red[unpaced_idx]}; "
          f"paced flow took {sent0['t_end'] - sent0['t_conn']:.2f} s; the controller's audit "
          f"(achieved / set): " + ", ".join(f"{g / e:.3f}" for g, e in audit if e))
    assert sent0["pace"] == pytest.approx(rate)          # paced from its first byte
    assert red[paced_idx] == 0                           # a cooperating sender is never dropped
    assert red[unpaced_idx] > 0                          # the other is policed to its rate
    assert abs(achieved / rate - 1) <= 0.10
