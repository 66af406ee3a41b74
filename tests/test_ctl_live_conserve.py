"""Live: the rate modes conserve work, and a size claim runs out with time as with bytes
(docs/explanation/design.md, "Work conservation"; docs/explanation/lying.md).

One BMv2 switch (a big switch of 4 hosts), each host a namespace of its own with real Linux TCP
and the emulation's agent; the controller runs SEBF at 10 Mb/s with the coflow API, its
default settings with both rules on (``conserve=1``, ``claim_time_factor=2``) and the room ``coflow run`` gives paced senders (meter and pace headroom and
holds). The hosts' IP MTU is 1,500 B, the frames the meters are sized for. Three cases, each
one that held an honest coflow at the meters' floor before the demand caps and the time claim
check:

- a liar L (h0 -> h2) declares 1,000 B and sends 4,000,000 B over a plain TCP socket (its agent
  does not follow the rate stream, so it does not pace); 20 ms later the honest H (h1 -> h2,
  paced by its agent) declares and sends 400,000 B. H's completion time must be within 2x its
  time beside an honest coflow of the liar's real size;
- a liar that trickles under the byte margin (1,000 B declared, 60 KB at 2 or 8 KB/s): H's
  delay must be within the bound of docs/explanation/lying.md, whichever the rate: with the
  controller's defaults (the demand caps, no time check) for a liar that does not mark its flow
  ready, and with the time check for one that does (a ready flow is not capped);
- an honest application-limited coflow A (h0 -> h2: 300 KB declared, written at a tenth of
  the link) ahead of a bulk coflow B (h1 -> h2, 4 MB, paced): while A runs, B must get at least
  80 % of what A leaves of the link.

Needs root and the P4 toolchain; skips loudly otherwise.
"""
import os
import subprocess
import sys
import time

import pytest

from coflow.dataplane.constants import IP_MTU

from live import BMV2_JSON, P4INFO, REPO, fabric_marks, offset_ids
from test_ctl_live_pacing import Agent, Hosts

pytestmark = fabric_marks()

LINK_MBPS = 10
L_BYTES, H_BYTES = 4_000_000, 400_000

#: a sender writing at an application's rate: HEADER, then ``bytes`` in 1,000-byte writes
#: every 1,000 / ``rate`` s, on a socket tagged with the coflow (as the agent's own)
_APP_SENDER = r"""
import socket, struct, sys, time
from coflow.dataplane.packet import set_socket_coflow
from coflow.dataplane.constants import CoflowId
from coflow.emu.agent import HEADER, MAGIC
dst, cid, coflow, nbytes, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
set_socket_coflow(s, CoflowId.parse(cid))
s.connect((dst, 5001))
s.sendall(HEADER.pack(MAGIC, 1, coflow, 0, nbytes))
t0, left, q = time.monotonic(), nbytes, 1000
while left > 0:
    n = min(q, left)
    s.sendall(b"\0" * n)
    left -= n
    sent = nbytes - left
    time.sleep(max(0.0, t0 + sent / rate - time.monotonic()))
s.shutdown(socket.SHUT_WR)
s.recv(1)
print("sent", flush=True)
"""


def _app_sender(hosts, h, dst_ip: str, cid: str, coflow: int, nbytes: int, rate: float):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "controller"))
    return subprocess.Popen(["ip", "netns", "exec", hosts.ns[h], sys.executable, "-c", _APP_SENDER,
                             dst_ip, cid, str(coflow), str(nbytes), str(rate)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    from coflow import topology as T
    from coflow.ctl.bmv2 import Fabric
    t = offset_ids(T.bigswitch(4), 905 + os.getpid() % 1000 * 10)
    with Fabric(t) as f:
        hosts = Hosts(t, f).start()
        # the hosts' IP MTU is the one the controller's meters are sized for (MAX_FRAME_BYTES:
        # a burst of two full frames); the fabric's veths take larger frames
        for h in t.hosts:
            subprocess.run(["ip", "-n", hosts.ns[h.name], "link", "set", h.intf, "mtu", str(IP_MTU)],
                           check=True)
        try:
            yield t, f, hosts, tmp_path_factory.mktemp("conserve")
        finally:
            hosts.stop()


def _settings(time_check: bool = True) -> dict:
    """The controller's settings: its defaults at 10 Mb/s, with the room a paced sender is
    given in ``coflow run`` (meters above the pace, lowered only after it: a sender paced at
    exactly its meter's rate loses segments to it whenever it bursts)."""
    from coflow.ctl.settings import CtlSettings
    from coflow.emu import plan as P
    rtt_s = CtlSettings().rtt_us / 1e6
    s = {"link_mbps": str(LINK_MBPS), "telemetry_s": "0", "audit_s": "0",
         "conserve": "1", "claim_time_factor": "2" if time_check else "0",   # the rules under test
         "meter_headroom": repr(P.METER_HEADROOM), "pace_headroom": repr(P.PACE_HEADROOM),
         "meter_hold_s": repr(P.METER_HOLD_RTTS * rtt_s), "pace_hold_s": repr(P.PACE_HOLD_RTTS * rtt_s)}
    # COFLOW_TEST_SETTINGS="k=v,k=v": the experiment log's comparisons (e.g. conserve=0)
    for kv in filter(None, os.environ.get("COFLOW_TEST_SETTINGS", "").split(",")):
        k, _, v = kv.partition("=")
        s[k] = v
    return s


def _ctl_settings(time_check: bool = True):
    from coflow.ctl.settings import split_settings
    return split_settings(_settings(time_check))[0]


class Run:
    """A controller with the API on the fabric, and an agent per host (h1's paced)."""

    def __init__(self, fabric, time_check: bool = True):
        self.t, self.f, self.hosts, self.tmp = fabric
        self.h = {x.name: x for x in self.t.hosts}
        self.time_check = time_check

    def __enter__(self):
        from coflow.api.server import serve
        from coflow.ctl.daemon import Controller
        self.ctl = Controller(self.t, "sebf", P4INFO, BMV2_JSON, self.f.addrs(),
                              settings=_settings(self.time_check))
        self.sock = f"unix:{self.tmp / f'api{time.monotonic_ns()}.sock'}"
        self.agents, self.server, self.procs = {}, None, []
        self.ctl.start()
        self.server = serve(self.ctl.registry, None, [self.sock],
                            after_register=lambda r: self.ctl.wait_installed(r.cid),
                            rates=self.ctl.rate_board)
        self.agents = {h.name: Agent(self.hosts, h) for h in self.t.hosts}
        for a in self.agents.values():
            a.wait("ready")
        self.agents["h1"].send(op="watch", api=self.sock)      # h1 paces; the others do not
        self.agents["h1"].wait("watching")
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for a in self.agents.values():
            a.stop()
        if self.server is not None:
            self.server.stop(None)
        self.ctl.stop()

    def app(self, src: str, cid, coflow: int, nbytes: int, rate: float):
        p = _app_sender(self.hosts, src, self.h["h2"].ip, cid, coflow, nbytes, rate)
        self.procs.append(p)
        return p

    def agent_send(self, src: str, cid, coflow: int, nbytes: int):
        self.agents[src].send(op="send", run=1, coflow=coflow, flow=0,
                              cid=cid, dst=self.h["h2"].ip,
                              port=5001, bytes=nbytes)

    def claims(self) -> dict:
        return self.ctl.status()["claims"]

    def sent(self, cid) -> int:
        ext, _, internal = cid.partition(".")
        with self.ctl._mu:
            return int(sum(self.ctl.progress.sent((int(ext), int(internal))).values()))


def honest_cct(fabric, l_declares: int, trickle: float = 0.0, ready: bool = False,
               time_check: bool = True) -> tuple[float, dict]:
    """H's completion time (s) beside L declaring ``l_declares`` (its flow registered ready:
    ``ready``) and sending over plain TCP (``trickle`` > 0: 60 KB at this many bytes/s
    instead), and the controller's claims."""
    from coflow.api.client import CoflowClient
    with Run(fabric, time_check) as r, CoflowClient(r.sock) as c:
        lc = c.register([("h0", "h2", l_declares, ready)])
        if trickle:
            r.app("h0", lc, 1, 60_000, trickle)    # under the byte margin for 7-30 s
        else:
            r.agent_send("h0", lc, 1, L_BYTES)
        time.sleep(0.02)
        hc = c.register([("h1", "h2", H_BYTES)])
        t0 = time.time()
        r.agent_send("h1", hc, 2, H_BYTES)
        done = r.agents["h2"].wait("done", timeout=60, coflow=2)
        claims = r.claims()
        c.unregister(hc)
        c.unregister(lc)
    return done["t"] - t0, claims


def test_a_liar_over_plain_tcp_does_not_hold_the_honest_coflow_at_the_floor(fabric):
    base, _ = honest_cct(fabric, L_BYTES)            # L honest: SEBF serves H first
    lied, claims = honest_cct(fabric, 1_000)
    print(f"H beside an honest 4 MB coflow: {base:.2f} s; beside the liar: {lied:.2f} s "
          f"({lied / base:.2f}x); liar distrusted: {bool(claims['distrusted'])}")
    assert lied <= 2 * base, f"H took {lied:.2f} s beside the liar, {base:.2f} s beside an honest coflow"


def bound_s(time_check: bool = True) -> float:
    """docs/explanation/lying.md: the longest an honest coflow waits behind a 1,000 B claim,
    whatever rate its liar sends at: the grant the time check lets it hold, at the link's
    rate, plus the slack and the reaction (two readings of the counters and a round, and the
    pace and meter holds)."""
    s = _ctl_settings(time_check)
    margin = 1_000 * (1 + s.claim_margin_frac) + s.claim_margin_bytes
    holds = s.pace_hold_s + s.meter_hold_s
    if not time_check:
        # the demand caps alone (a liar whose flow is not ready): 2 x 6 readings' worth of the
        # margin, the meters' floor's share of H's own time, three readings
        from coflow.ctl.demand import DEMAND_WINDOW
        floor = 4 * s.min_rate_frac
        h_alone = H_BYTES / s.link_payload_Bps
        return ((1 + s.demand_headroom) * DEMAND_WINDOW * margin / s.link_payload_Bps
                + floor / (1 - floor) * h_alone + 3 * s.progress_s + holds)
    held = s.claim_time_factor * margin
    return held / s.link_payload_Bps + s.claim_slack_s + 2 * s.progress_s + holds


@pytest.mark.parametrize("trickle,ready,time_check", [
    (2_000.0, False, False), (8_000.0, False, False),    # the defaults: the caps
    (2_000.0, True, True), (8_000.0, True, True),        # a liar claiming readiness: the time check
], ids=["2KBps-caps", "8KBps-caps", "2KBps-ready-time-check", "8KBps-ready-time-check"])
def test_a_liar_trickling_under_the_margin_delays_the_honest_coflow_within_the_bound(
        fabric, trickle, ready, time_check):
    alone, _ = honest_cct(fabric, L_BYTES, time_check=time_check)
    lied, claims = honest_cct(fabric, 1_000, trickle=trickle, ready=ready, time_check=time_check)
    bound = bound_s(time_check)
    print(f"H beside an honest coflow: {alone:.2f} s; beside a liar trickling {trickle / 1e3:.0f} KB/s"
          f"{' (ready)' if ready else ''}: {lied:.2f} s (delay {lied - alone:.2f} s, bound "
          f"{bound:.2f} s); distrusted: {claims['distrusted']}; caps changed "
          f"{claims['totals']['cap_changes']}")
    if ready:    # a ready flow is never capped: the time check caught it
        assert claims["totals"]["distrusted_held"] == 1, claims
    # (+ 0.3 s: a noisy 2-core host)
    assert lied - alone <= bound + 0.3, f"H delayed {lied - alone:.2f} s, bound {bound:.2f} s"


def test_an_application_limited_coflow_leaves_its_rate_to_the_one_behind(fabric):
    from coflow.api.client import CoflowClient
    pay = _ctl_settings().link_payload_Bps
    a_rate = pay / 10
    with Run(fabric) as r, CoflowClient(r.sock) as c:
        ac = c.register([("h0", "h2", 300_000)])
        a = r.app("h0", ac, 1, 300_000, a_rate)
        time.sleep(0.05)
        bc = c.register([("h1", "h2", 4_000_000)])
        r.agent_send("h1", bc, 2, 4_000_000)
        time.sleep(0.8)                       # B's start and a reading or two
        t0, b0, a0 = time.time(), r.sent(bc), r.sent(ac)
        time.sleep(1.2)
        t1, b1, a1 = time.time(), r.sent(bc), r.sent(ac)
        assert a.poll() is None, "A finished before the measurement did"
        claims = r.claims()
        got, a_used = (b1 - b0) / (t1 - t0), (a1 - a0) / (t1 - t0)
        left = pay - a_used
        print(f"A used {a_used / 1e3:.0f} KB/s; B got {got / 1e3:.0f} KB/s of the "
              f"{left / 1e3:.0f} KB/s A left ({got / left:.0%}); distrusted: {claims['distrusted']}")
        assert not claims["distrusted"], f"an honest coflow was distrusted: {claims['distrusted']}"
        assert got >= 0.8 * left, f"B got {got / 1e3:.0f} KB/s of {left / 1e3:.0f} KB/s left"
        c.unregister(bc)
        c.unregister(ac)
