"""Failover across "machines" on etcd (`make bench-failover`, tests/test_ha_live.py).

:class:`Rig`: a 3-member etcd cluster on loopback addresses (127.0.0.1-3,
:class:`coflow.api.etcd.LocalCluster`), a BMv2 leaf-spine in a namespace of its own
(:class:`coflow.ctl.bmv2.Fabric`, P4Runtime on unix sockets), and two controllers, ``coflow
ctl run --etcd``, each in a network namespace of its own (a "machine"): it reaches etcd over a
veth to the root namespace (10.231.<k>.1, where every member also listens) and the switches
over their unix sockets. Applications reach each controller's API on its unix socket.

:meth:`Rig.kill_primary`: register coflows through the primary (acknowledged = answered),
keep registering from a client thread that follows whoever is primary, SIGKILL the primary's
process, and measure the **takeover**: from the kill to the backup's first round written as
primary (its status: ``ha.first_round_at``). Then every acknowledged coflow must be in the new
primary's registry and have a slot on the switches (``lost`` counts those that do not). The
killed controller is restarted as the new backup. :meth:`Rig.kill_etcd_member` kills one
etcd member while registering: no takeover, nothing lost.

Needs root (namespaces), etcd (Debian etcd-server) and the P4 build (`make p4`).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from ..api.etcd import LocalCluster


def _sh(*cmd, check=True):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


class Rig:
    def __init__(self, topo, p4info: str, bmv2_json: str, mode: str = "dclas",
                 base_port: int | None = None, log=print):
        self.topo = topo
        self.p4info, self.bmv2_json = p4info, bmv2_json
        self.mode = mode
        self.base = base_port or 33000 + os.getpid() % 300 * 20
        self.log = log
        self.tag = f"cfha{os.getpid() % 100000}"
        self.dir = tempfile.mkdtemp(prefix="coflow-failover-")
        self.ns = {"A": f"{self.tag}a", "B": f"{self.tag}b"}
        self.gw = {"A": "10.231.1.1", "B": "10.231.2.1"}
        self.prefix = f"/coflow/failover-{os.getpid()}"
        self.procs: dict = {}
        self.cluster: LocalCluster | None = None
        self.fabric: Any = None
        self.topo_file = os.path.join(self.dir, "topo.json")
        topo.save(self.topo_file)

    # set-up -----------------------------------------------------------------------------
    def start(self) -> "Rig":
        from .bmv2 import Fabric
        try:
            for name, ns in sorted(self.ns.items()):
                _sh("ip", "netns", "del", ns, check=False)
                _sh("ip", "netns", "add", ns)
                host, peer = f"{self.tag}{name.lower()}0", f"{self.tag}{name.lower()}1"
                _sh("ip", "link", "del", host, check=False)
                _sh("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
                _sh("ip", "link", "set", peer, "netns", ns)
                _sh("ip", "addr", "add", f"{self.gw[name]}/30", "dev", host)
                _sh("ip", "link", "set", host, "up")
                ip2 = self.gw[name][:-1] + "2"
                _sh("ip", "-n", ns, "addr", "add", f"{ip2}/30", "dev", peer)
                _sh("ip", "-n", ns, "link", "set", peer, "up")
                _sh("ip", "-n", ns, "link", "set", "lo", "up")
            self.cluster = LocalCluster(client_port=self.base, peer_port=self.base + 10,
                                        data_dir=os.path.join(self.dir, "etcd"),
                                        extra_client_hosts=tuple(self.gw[n] for n in sorted(self.gw)))
            self.cluster.start()
            self.fabric = Fabric(self.topo, netns=f"{self.tag}f").start()
            for name in sorted(self.ns):
                self.start_controller(name)
            self.wait_primary(30)
        except BaseException:
            self.stop()
            raise
        return self

    def endpoints(self, name: str) -> str:
        # every member, through this namespace's gateway (member k at client_port + 1 + k)
        assert self.cluster is not None
        return ",".join(self.cluster.endpoints(via=self.gw[name]))

    def sock(self, name: str) -> str:
        return os.path.join(self.dir, f"api-{name}.sock")

    def status_file(self, name: str) -> str:
        return os.path.join(self.dir, f"status-{name}.json")

    def start_controller(self, name: str) -> None:
        sw = [x for s, a in self.fabric.addrs().items() for x in ("--switch", f"{s}={a}")]
        for p in (self.status_file(name), self.sock(name)):
            if os.path.exists(p):
                os.unlink(p)
        cmd = ["ip", "netns", "exec", self.ns[name], sys.executable, "-m", "coflow.cli", "ctl", "run",
               "--topo", self.topo_file, "--mode", self.mode, *sw, "--p4info", self.p4info,
               "--json", self.bmv2_json, "--etcd", self.endpoints(name), "--etcd-prefix", self.prefix,
               "--ha-name", name, "--api-unix", self.sock(name), "--status-file", self.status_file(name),
               "--lease-s", "0", "--set", "telemetry_s=0", "--set", "audit_s=0"]
        out = open(os.path.join(self.dir, f"ctl-{name}.log"), "ab")
        self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()

    def status(self, name: str) -> dict | None:
        try:
            with open(self.status_file(name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def primary(self) -> str | None:
        for n in sorted(self.ns):
            st = self.status(n)
            p = self.procs.get(n)
            if st and p is not None and p.poll() is None and st["ha"].get("primary") \
                    and st["ha"].get("first_round_at"):
                return n
        return None

    def wait_primary(self, timeout: float) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for n, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"controller {n} exited with {p.returncode}; see {self.dir}/ctl-{n}.log")
            n = self.primary()
            if n is not None and all(os.path.exists(self.sock(m)) for m in self.procs):
                return n
            time.sleep(0.05)
        raise RuntimeError(f"no primary within {timeout} s; logs in {self.dir}")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        self.procs = {}
        if self.fabric is not None:
            self.fabric.stop()
            self.fabric = None
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        for name, ns in self.ns.items():
            _sh("ip", "link", "del", f"{self.tag}{name.lower()}0", check=False)
            _sh("ip", "netns", "del", ns, check=False)

    # load and faults ----------------------------------------------------------------------
    def _client(self, name: str):
        from ..api.client import CoflowClient
        return CoflowClient(f"unix:{self.sock(name)}", timeout=2, retry_s=0, keepalive=False)

    def _registrar(self, stop: threading.Event, acked: list, tag: str):
        """Register coflows through whoever is primary, one every ~20 ms: a Register that
        fails (FAILED_PRECONDITION at a backup, UNAVAILABLE at a dead one) is retried with the
        same request id at the other controller; only answered ones are acknowledged."""
        from ..api.client import CoflowApiError
        hosts = [h.name for h in self.topo.hosts]
        clients = {n: self._client(n) for n in self.ns}
        i = 0
        try:
            while not stop.is_set():
                rid = f"{tag}-{i}"
                flows = [(hosts[i % len(hosts)], hosts[(i + 1) % len(hosts)], 10_000 + i)]
                for _attempt in range(200):
                    if stop.is_set():
                        break
                    done = False
                    for n in sorted(self.ns, key=lambda n: n != self.primary()):
                        try:
                            acked.append((clients[n].register(flows, request_id=rid), rid))
                            done = True
                            break
                        except CoflowApiError:
                            continue
                    if done:
                        break
                    time.sleep(0.02)
                i += 1
                time.sleep(0.02)
        finally:
            for c in clients.values():
                c.close()

    def _check(self, name: str, acked: list) -> dict:
        """Every acknowledged coflow in ``name``'s registry (once per request id) and holding a
        slot on the switches (its status, once it has caught up)."""
        with self._client(name) as c:
            live = {d["coflow_id"] for d in c.list()}
        ids = {cid for cid, _ in acked}
        dup = len(acked) - len({rid for _, rid in acked})
        end = time.monotonic() + 5
        slots: dict = {}
        while time.monotonic() < end:
            st = self.status(name) or {"coflows": []}
            slots = {x["cid"]: x["slot"] for x in st["coflows"]}
            if ids <= set(slots) and all(slots[c] is not None for c in ids):
                break
            time.sleep(0.1)
        lost = sorted(ids - live)
        no_slot = sorted(c for c in ids & live if slots.get(c) is None)
        return {"acked": len(ids), "lost": len(lost), "lost_ids": lost[:10], "duplicates": dup,
                "without_slot": len(no_slot)}

    def kill_primary(self, before: int = 20) -> dict:
        old = self.wait_primary(30)
        new = next(n for n in self.ns if n != old)
        with self._client(old) as c:
            pre = [(c.register([(self.topo.hosts[0].name, self.topo.hosts[-1].name, 1000 + i)],
                                request_id=f"pre-{time.time_ns()}-{i}"), f"pre-{i}") for i in range(before)]
        acked: list = []
        stop = threading.Event()
        th = threading.Thread(target=self._registrar, args=(stop, acked, f"k{time.time_ns()}"), daemon=True)
        th.start()
        time.sleep(0.3)
        st0 = self.status(new) or {"ha": {"takeovers": 0}}
        t_kill = time.time()
        os.killpg(self.procs[old].pid, signal.SIGKILL)
        self.procs[old].wait(5)
        end = time.monotonic() + 20
        took = None
        while time.monotonic() < end:
            st = self.status(new)
            if st and st["ha"]["takeovers"] > st0["ha"]["takeovers"] and st["ha"].get("first_round_at"):
                took = st["ha"]["first_round_at"] - t_kill
                break
            time.sleep(0.05)
        time.sleep(0.5)          # registrations continue at the new primary
        stop.set()
        th.join(10)
        res = {"killed": old, "new_primary": new, "takeover_s": took,
               **self._check(new, pre + acked)}
        self.log(f"  killed {old}: {new} primary after {took if took is None else round(took, 3)} s; "
                 f"acked {res['acked']}, lost {res['lost']}, without slot {res['without_slot']}")
        self.start_controller(old)                     # back, as the backup
        self.wait_primary(30)
        end = time.monotonic() + 30
        while time.monotonic() < end and not (self.status(old) or {}).get("rounds"):
            time.sleep(0.05)
        return res

    def kill_etcd_member(self, k: int = 0) -> dict:
        assert self.cluster is not None
        prim = self.wait_primary(30)
        acked: list = []
        stop = threading.Event()
        th = threading.Thread(target=self._registrar, args=(stop, acked, f"m{time.time_ns()}"), daemon=True)
        th.start()
        time.sleep(0.5)
        n0 = len(acked)
        self.cluster.kill(k)
        time.sleep(2.0)
        stop.set()
        th.join(10)
        after = self.primary()
        if after is None:   # a status read between writes, or a re-election of etcd's leader under load
            try:
                after = self.wait_primary(10)
            except RuntimeError:
                after = None
        res = {"member": k, "primary_before": prim, "primary_after": after,
               "acked_after_kill": len(acked) - n0, **self._check(after or prim, acked)}
        self.log(f"  killed etcd member {k}: primary {prim} -> {after}; acked {res['acked']} "
                 f"({res['acked_after_kill']} after the kill), lost {res['lost']}")
        self.cluster.start(k)
        return res
