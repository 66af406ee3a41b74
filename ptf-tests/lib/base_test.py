"""Base class and helpers for the coflow pipeline's PTF tests (fabric-p4test style).

- ``P4RuntimeTest``: one P4Runtime connection per ptf process (master, election id 1), the
  P4Info loaded from the file the runner passed, helpers that build entries by name.
- ``autocleanup``: every write a test makes is journaled and undone after the test, pass or fail
  (INSERT -> DELETE, MODIFY of a default action / meter -> the value read before).
- Packet helpers: tagged/untagged packets of an exact frame length, the packet the switch should
  emit, and paced sending (BMv2 here loses the tail of back-to-back bursts: p4-notes).

Test parameters (ptf --test-params): grpc, p4info, device_id, swports (the switch-side
interfaces, comma separated, in port order; the traffic-manager tests shape them).
"""
from __future__ import annotations

import os
import sys
import time
from functools import wraps

import ptf  # noqa: E402
import ptf.testutils as testutils  # noqa: E402
from ptf.base_tests import BaseTest  # noqa: E402
from scapy.all import IP, TCP, UDP, Ether, Raw, raw  # noqa: E402

from coflow.dataplane import packet as pk  # noqa: E402
from coflow.dataplane.constants import SLOT_IDLE_EPOCHS  # noqa: E402
from coflow.dataplane.p4rt import P4RuntimeClient  # noqa: E402
from coflow.params import DclasParams, hw_priority  # noqa: E402

SWITCH_MAC = "00:aa:00:00:00:01"
HOST_MAC = "00:bb:00:00:00:%02x"
PACE = 0.0012            # seconds between packets sent to the switch (>= 1 ms, p4-notes)
RECV_TIMEOUT = 2.0       # seconds to wait for an expected packet
NO_PKT_TIMEOUT = 0.3     # seconds of silence that prove a drop

_client: P4RuntimeClient | None = None
_next_ext = [1000]
_next_slot = [0]


def test_param(name: str, default=None):
    return testutils.test_params_get().get(name, default)


def client() -> P4RuntimeClient:
    """The process-wide P4Runtime connection (the runner already pushed the pipeline)."""
    global _client
    if _client is None:
        c = P4RuntimeClient(test_param("grpc", "127.0.0.1:9559"),
                            device_id=int(test_param("device_id", 0)), election_id=1)
        c.connect(timeout=10)
        c.load_p4info(test_param("p4info"))
        _client = c
    return _client


def new_coflow(internal: int = 0) -> pk.CoflowId:
    """A CoflowId no other test in this run uses (slot registers persist between tests)."""
    _next_ext[0] += 1
    return pk.CoflowId(_next_ext[0], internal)


def autocleanup(f):
    """Undo every P4Runtime write made by ``f`` when it returns or raises."""
    @wraps(f)
    def handle(*args, **kwargs):
        test = args[0]
        test.p4rt.start_journal()
        try:
            return f(*args, **kwargs)
        finally:
            errors = test.p4rt.undo()
            if errors:
                print("autocleanup: could not undo: " + "; ".join(errors), file=sys.stderr)
    return handle


def frame(cid: pk.CoflowId | None = None, length: int = 100, src="10.0.0.1", dst="10.0.1.1",
          sport=1234, dport=80, proto="udp", ident=1, tos=0, ttl=64, stamped=False, prio=0,
          smac=None, dmac=SWITCH_MAC, flags=0, frag=0, extra_options=()):
    """An Ethernet frame of exactly ``length`` bytes (no FCS), tagged when ``cid`` is given."""
    opts = list(extra_options)
    if cid is not None:
        opts = [pk.coflow_option(cid, stamped, prio)] + opts
    ip = IP(src=src, dst=dst, id=ident, tos=tos, ttl=ttl, flags=flags, frag=frag, options=opts)
    l4 = UDP(sport=sport, dport=dport) if proto == "udp" else TCP(sport=sport, dport=dport)
    p = Ether(src=smac or HOST_MAC % 1, dst=dmac) / ip / l4
    pad = length - len(p)
    if pad < 0:
        raise ValueError(f"frame of {length} bytes too short for its headers ({len(p)})")
    return Ether(raw(p / Raw(b"\x00" * pad)))


def expected(pkt, prio: int, smac=SWITCH_MAC, dmac=HOST_MAC % 2, tagged=True):
    """What the switch emits for ``pkt``: MACs rewritten, TTL - 1, DSCP = CS<prio>, the option
    stamped (S=1, prio), checksum recomputed. ``tagged=False``: the switch treats the packet
    as untagged (its CoflowId option, if any, is not the first option), so every option byte
    leaves as it came. Works on the bytes, so options scapy does not know survive."""
    data = bytearray(raw(pkt))
    e = Ether(bytes(data))
    ihl = data[14] & 0xF
    data[0:6] = bytes.fromhex(dmac.replace(":", ""))
    data[6:12] = bytes.fromhex(smac.replace(":", ""))
    data[15] = (data[15] & 0x3) | pk.tos_of_prio(prio)
    data[22] -= 1                                         # TTL
    if tagged and IP in e and pk.find_coflow_option(e[IP]) is not None:
        first = 34                                        # the switch stamps the first option
        if data[first] != pk.IPOPT_COFLOW_TYPE or data[first + 1] != pk.IPOPT_COFLOW_LEN:
            raise ValueError("a tagged packet's CoflowId option must be its first option")
        data[first + 2] = (data[first + 2] & 0x78) | pk.STAMPED_BIT | prio
    data[24:26] = b"\0\0"
    data[24:26] = ip_checksum(bytes(data[14:14 + ihl * 4])).to_bytes(2, "big")
    return Ether(bytes(data))


def ip_checksum(header: bytes) -> int:
    """The IPv4 header checksum (ones' complement sum of 16-bit words)."""
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def split_bytes(total: int, mtu: int = 1500, minimum: int = 80) -> list[int]:
    """Frame lengths (each in [minimum, mtu]) that add up to exactly ``total``."""
    if total < minimum:
        raise ValueError("total below one minimum frame")
    sizes = []
    while total > 0:
        if total <= mtu:
            sizes.append(total)
            break
        take = mtu if total - mtu >= minimum else total - minimum
        sizes.append(take)
        total -= take
    return sizes


def bmv2_cli(commands: list[str], thrift_port: int | None = None, timeout: float = 20.0) -> str:
    """Run BMv2's ``simple_switch_CLI`` (Thrift) on the switch under test with ``commands`` on
    its stdin; returns its output. Raises RuntimeError (with the reason) when the CLI, its
    Python modules or the Thrift port are not there. The CLI script needs a Python with the
    thrift module (Debian's python3-thrift under /usr/bin/python3) and BMv2's generated
    modules, installed beside it under <prefix>/lib/python3*/site-packages."""
    import glob
    import subprocess
    from coflow.dataplane import toolchain
    cli = toolchain.find_tool("simple_switch_CLI")
    if not cli:
        raise RuntimeError("simple_switch_CLI not found (toolchain.discover())")
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(cli)))
    paths = [d for pat in ("lib/python3*/site-packages", "lib/python3*/dist-packages",
                           "lib/python3/dist-packages")
             for d in glob.glob(os.path.join(prefix, pat))]
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]))
    if thrift_port is None:
        thrift_port = int(test_param("thrift", 9090))   # the runner passes the switch's
    r = subprocess.run([python, cli, "--thrift-port", str(thrift_port)],
                       input="\n".join(commands) + "\n", capture_output=True, text=True,
                       timeout=timeout, env=env)
    out = r.stdout + r.stderr
    if r.returncode != 0 or "Error" in out or "Traceback" in out:
        raise RuntimeError(f"simple_switch_CLI failed (exit {r.returncode}): {out.strip()[-400:]}")
    return out


class P4RuntimeTest(BaseTest):
    """Base for every test: P4Runtime helpers and paced packet I/O."""

    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.p4rt = client()
        self._member_id = 100
        self._group_id = 100
        self.ports = sorted(p for (_, p) in ptf.config["port_map"].keys())

    def tearDown(self):
        self.dataplane.flush()
        BaseTest.tearDown(self)

    # --- packet I/O ----------------------------------------------------------------------
    def send(self, port: int, pkt, pace: float = PACE) -> None:
        testutils.send_packet(self, port, raw(pkt))
        if pace:
            time.sleep(pace)

    def recv(self, port: int, timeout: float = RECV_TIMEOUT):
        """Next packet received on ``port`` (a scapy Ether) or None."""
        res = self.dataplane.poll(device_number=0, port_number=port, timeout=timeout)
        if res is None or not hasattr(res, "packet") or res.packet is None:
            return None
        return Ether(res.packet)

    def recv_any(self, timeout: float = RECV_TIMEOUT):
        """(port, packet) of the next packet received on any port, or (None, None)."""
        res = self.dataplane.poll(device_number=0, port_number=None, timeout=timeout)
        if res is None or not hasattr(res, "packet") or res.packet is None:
            return None, None
        return res.port, Ether(res.packet)

    def recv_n(self, port: int, n: int, timeout: float = 5.0) -> list:
        """Up to ``n`` packets from ``port``, waiting at most ``timeout`` seconds in total."""
        out, deadline = [], time.time() + timeout
        while len(out) < n and time.time() < deadline:
            p = self.recv(port, timeout=max(0.01, deadline - time.time()))
            if p is not None:
                out.append(p)
        return out

    def assert_forwarded(self, pkt, port: int, prio: int, in_port: int = 0, dmac=None,
                         tagged: bool = True):
        """Send ``pkt`` and check the exact bytes that leave ``port`` (``tagged=False``: the
        switch must not stamp a CoflowId option that is not the first option)."""
        exp = expected(pkt, prio, dmac=dmac or HOST_MAC % (port + 1), tagged=tagged)
        self.send(in_port, pkt)
        testutils.verify_packet(self, raw(exp), port, timeout=RECV_TIMEOUT)

    def probe_prio(self, pkt, port: int, in_port: int = 0) -> int:
        """Send ``pkt``, receive it on ``port``, return the priority the switch stamped (DSCP)."""
        self.send(in_port, pkt)
        got = self.recv(port)
        self.assertIsNotNone(got, "probe packet not forwarded")
        return pk.prio_of_tos(got[IP].tos)

    def drain(self, port: int, n: int, timeout: float = 5.0) -> list:
        got = self.recv_n(port, n, timeout)
        self.assertEqual(len(got), n, f"expected {n} packets on port {port}, got {len(got)}")
        return got

    # --- P4Runtime helpers ------------------------------------------------------------------
    def add_route(self, prefix: str, plen: int, port: int, dmac=None):
        self._member_id += 1
        mid = self._member_id
        self.p4rt.insert(self.p4rt.member("ecmp_selector", mid, "set_next_hop",
                                          {"port": port, "smac": SWITCH_MAC,
                                           "dmac": dmac or HOST_MAC % (port + 1)}))
        self.p4rt.insert(self.p4rt.table_entry("routing_v4", {"ipv4_dst": (prefix, plen)},
                                               member_id=mid))
        return mid

    def add_ecmp_route(self, prefix: str, plen: int, ports: list[int]):
        members = []
        for port in ports:
            self._member_id += 1
            members.append(self._member_id)
            self.p4rt.insert(self.p4rt.member("ecmp_selector", self._member_id, "set_next_hop",
                                              {"port": port, "smac": SWITCH_MAC,
                                               "dmac": HOST_MAC % (port + 1)}))
        self._group_id += 1
        self.p4rt.insert(self.p4rt.group("ecmp_selector", self._group_id, members,
                                         max_size=len(members)))
        self.p4rt.insert(self.p4rt.table_entry("routing_v4", {"ipv4_dst": (prefix, plen)},
                                               group_id=self._group_id))
        return self._group_id

    def set_ecmp_window(self, shift: int):
        """The switch's ECMP hash window (routing.p4): the selector hashes bits
        [shift + 15 : shift] of the 5-tuple's CRC-32."""
        self.p4rt.modify(self.p4rt.table_entry("ecmp_window", default=True,
                                               action="set_ecmp_window", params={"shift": shift}))

    def set_config(self, mode: int = pk.MODE_DCLAS, fair_prio: int = 4,
                   heavy_bytes: int = (1 << 64) - 1, fifo_base: int = 0, managed: int = 0,
                   slot_idle_epochs: int = SLOT_IDLE_EPOCHS):
        """The defaults are the compiled default (no controller: ``managed`` 0)."""
        self.p4rt.modify(self.p4rt.table_entry(
            "pipeline_config", default=True, action="set_config",
            params={"mode": mode, "fair_prio": fair_prio, "heavy_bytes": heavy_bytes,
                    "fifo_base": fifo_base, "managed": managed,
                    "slot_idle_epochs": slot_idle_epochs}))

    def set_port_role(self, port: int, edge: bool):
        self.p4rt.insert(self.p4rt.table_entry("port_role", {"ingress_port": port}, "set_role",
                                               {"role": 1 if edge else 0}))

    def install_dclas(self, params: DclasParams):
        """The D-CLAS range table from the shared parameter object (queue -> BMv2 priority)."""
        entries = []
        for lo, hi, q in params.ranges():
            entries.append(self.p4rt.table_entry("dclas_thresholds", {"bytes": (lo, hi)},
                                                 "dclas.set_queue", {"prio": hw_priority(q)},
                                                 priority=1))
        self.p4rt.insert(*entries)

    def assign_slot(self, cid: pk.CoflowId, slot: int):
        self.p4rt.write_counter("coflow_bytes", slot, 0, 0)
        self.p4rt.insert(self.p4rt.table_entry(
            "coflow_slot", {"external_id": cid.external, "internal_id": cid.internal},
            "set_slot", {"slot": slot}))

    def fresh_coflow(self, internal: int = 0) -> pk.CoflowId:
        """A new CoflowId with its own assigned counter slot (100..499), so its byte count
        starts at 0 and no hash collision can disturb it."""
        cid = new_coflow(internal)
        _next_slot[0] = (_next_slot[0] + 1) % 400
        self.assign_slot(cid, 100 + _next_slot[0])
        return cid

    def set_override(self, cid: pk.CoflowId, prio: int):
        self.p4rt.insert(self.p4rt.table_entry(
            "coflow_override", {"external_id": cid.external, "internal_id": cid.internal},
            "override.set_queue", {"prio": prio}))

    def slot_of(self, cid) -> int:
        """The counter slot the controller's coflow_slot entry gives ``cid`` (read back)."""
        for ent in self.p4rt.read_table("coflow_slot"):
            te = ent.table_entry
            if int.from_bytes(te.match[0].exact.value, "big") == cid.external:
                return int.from_bytes(te.action.action.params[0].value, "big")
        self.fail("slot entry not found")

    def counter(self, name: str, index: int) -> tuple[int, int]:
        return self.p4rt.read_counter(name, index)

    def drops(self, reason: int) -> int:
        return self.counter("drop_reasons", reason)[1]

    def send_bytes(self, cid: pk.CoflowId, total: int, port_in: int = 0, port_out: int = 1,
                   dst="10.0.1.1", **kw) -> list[int]:
        """Send exactly ``total`` frame bytes of coflow ``cid`` and drain them from ``port_out``."""
        sizes = split_bytes(total)
        for i, size in enumerate(sizes):
            self.send(port_in, frame(cid, size, dst=dst, ident=i, **kw))
        self.drain(port_out, len(sizes))
        return sizes
