"""A Mininet fabric of BMv2 switches built from a topology file, with the emulated traffic manager.

Links are plain veth pairs (no TCLink: these kernels have no netem, and TCLink's own shaper
would put one FIFO where the priority queues belong). Every switch egress interface instead gets
the emulated traffic manager of :mod:`coflow.dataplane.tm` (HTB: a parent at the link rate, one
class per priority, strict or weighted; one class for fair), re-applied per mode with
:meth:`Fabric.apply_tm`. Host interfaces are not shaped: a host's sending rate is bounded by the
switch ports it goes through.

Queue limits: BMv2 transmits through an AF_PACKET socket per port, and a frame queued in the
qdisc counts against that socket's send buffer (``wmem_default``, 208 KiB: about 90 MTU frames
at their true size). Past it BMv2's single transmit thread blocks, stalling every port of that
switch, and frames are lost inside BMv2 instead of in the priority queues. So every switch's
packet sockets get a send buffer that holds every frame its queues can hold
(:func:`port_sndbuf`, set from outside the process: :mod:`coflow.dataplane.sockbuf`), and the
queues of one port are sized from a ``queue_budget`` of frames (:func:`tm_config`): excess
traffic is dropped in the priority queues, where TCP sees it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from ..dataplane import tm
from ..dataplane.toolchain import discover
from .. import topology as topo
from .switch import MARKER, static_arp

from .plan import QUEUE_BUDGET  # noqa: E402 (defined with the plan: the CLI reads it without Mininet)


@dataclass(frozen=True)
class TmPlan:
    """Traffic manager of one mode: discipline and number of queues."""

    discipline: str        # tm.STRICT or tm.WEIGHTED
    queues: int
    weights: tuple[float, ...] | None = None


def tm_for_mode(mode: str, weighted_dclas: bool = False) -> TmPlan:
    """fair enforcement: everything in one class; the dclas pipeline: 8 strict queues (Aalo's
    weights when ``weighted_dclas``); fifo-lm and the scheduled modes (sebf, hug, utopia, fai,
    sincronia, ...): 8 strict queues (FIFO-LM's ranks and the rate modes' overrides are
    priorities; the meters set the rates)."""
    from ..sched import deploy as D
    from ..sched.base import FAIR
    if D.enforcement(mode) == FAIR:
        return TmPlan(tm.STRICT, 1)
    if weighted_dclas and D.pipeline(mode) == "dclas":
        from ..params import DclasParams
        return TmPlan(tm.WEIGHTED, tm.NUM_PRIOS, tuple(DclasParams(K=tm.NUM_PRIOS).queue_weights()))
    return TmPlan(tm.STRICT, tm.NUM_PRIOS)


def tm_config(plan: TmPlan, rate_kbit: int, budget: int = QUEUE_BUDGET,
              class_floor: float = 0.0) -> tm.TmConfig:
    """One class holds the whole budget; with several, each leaf holds half of it: under strict
    priority the backlog sits in one or two queues at a time (the lowest busy ones), and a
    leaf of budget/8 frames starves the bulk queue's TCP flows into timeouts.
    ``class_floor``: under strict priority every class is guaranteed this fraction of the port
    (HTB ``rate``; spare bandwidth still goes by priority), so that no class is starved
    outright; 0 = the minimal 1 kbit/s (pure strict priority)."""
    limit = budget if plan.queues == 1 else max(2, budget // 2)
    floor = max(1, int(round(rate_kbit * class_floor)))
    return tm.TmConfig(rate_kbit=rate_kbit, discipline=plan.discipline, weights=plan.weights,
                       queues=plan.queues, limit_pkts=limit, min_rate_kbit=floor)


#: The two highest classes hold up to 64 packets: new coflows start there, and a burst of
#: arrivals opens hundreds of connections at once (SYNs and first segments, mostly small
#: frames, so the bytes stay far below the AF_PACKET budget).
TOP_QUEUES = 2
TOP_LIMIT = 64


def leaf_limits(cfg: tm.TmConfig) -> dict[int, int]:
    """Frames each priority's queue holds (:func:`tm_commands`)."""
    top = set(sorted(cfg.prios())[-TOP_QUEUES:]) if cfg.queues > 1 else set()
    return {p: max(cfg.limit_pkts, TOP_LIMIT) if p in top else cfg.limit_pkts for p in cfg.prios()}


#: Bytes one MTU frame takes in a packet socket's send buffer, rounded up from the measured
#: 2,242 (95 frames filled 212,992 bytes).
FRAME_TRUESIZE = 2560


def port_sndbuf(budget: int = QUEUE_BUDGET) -> int:
    """Send buffer for a switch port's transmit socket: every frame the port's queues can hold
    in any mode (:func:`tm_for_mode`) at ``budget``, plus BMv2's own burst of 64."""
    frames = max(sum(leaf_limits(tm_config(TmPlan(tm.STRICT, q), 1000, budget)).values())
                 for q in (1, tm.NUM_PRIOS))
    return (frames + 64) * FRAME_TRUESIZE


def tm_commands(dev: str, cfg: tm.TmConfig) -> list[list[str]]:
    """:func:`coflow.dataplane.tm.htb_commands`, with the leaves of the two highest classes
    holding ``TOP_LIMIT`` packets.

    Every packet is classified on the DSCP the pipeline wrote. That includes the receivers'
    ACKs, SYN-ACKs and FINs, which carry no CoflowId: the controller's ``untagged_class``
    entry puts small untagged TCP in the highest class at the edges
    (:func:`coflow.ctl.translate.control_class_entities`), since in the default class, the
    lowest, data going the other way would starve them under strict priority (measured before
    that entry existed: 70-byte coflows taking 5-12 s under dclas)."""
    cmds = tm.htb_commands(dev, cfg)
    limits = {tm.classid(p): n for p, n in leaf_limits(cfg).items()}
    out = []
    for c in cmds:
        if "pfifo" in c:
            c = c[:c.index("limit") + 1] + [str(limits[c[c.index("parent") + 1]])]
        out.append(c)
    return out


class FabricError(RuntimeError):
    pass


def switch_offloads_off(devs: list[str]) -> None:
    """Offloads off on the switches' interfaces, before BMv2 opens them. libpcap sizes the
    slots of a capture ring from the interface: with TSO/GSO/GRO on (a veth's default) every
    slot is 64 KiB, so BMv2's 2 MiB ring per port holds about 30 frames and a switch process
    that is off CPU for a few milliseconds loses whatever arrives meanwhile ("lost before the
    pipeline" in the reports); with them off a slot is an MTU frame and the ring holds ~1,000."""
    from .switch import OFFLOADS
    args = [a for o in OFFLOADS for a in (o, "off")]
    for dev in devs:
        subprocess.run(["ethtool", "-K", dev, *args], capture_output=True)


def conflicting_interfaces(t: topo.Topology) -> list[str]:
    """Interfaces of ``t`` that already exist in the root namespace (another fabric is up)."""
    names = {s.intf(p) for s in t.switches for p in s.ports}
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    present = {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}
    return sorted(names & present)


#: Scheduling priority of the switch processes. The switches stand for hardware, which the hosts
#: cannot slow down; on 2 shared cores a BMv2 process short of CPU loses frames before its
#: pipeline (its capture socket overflows), whatever their class: measured 7,048 of 542,796
#: frames in a dclas run at nice 0 (3,612 SYN retransmissions, 70-byte coflows taking 1-5 s).
#: Agents short of CPU only send later (TCP is self-clocked), so the switches go first.
SWITCH_NICE = -10


class Fabric:
    """Mininet network of :class:`BMv2Switch` and :class:`EmuHost` built from ``t``."""

    def __init__(self, t: topo.Topology, sw_path: str | None = None, run_dir: str | None = None,
                 log_level: str = "off", switch_nice: int = SWITCH_NICE,
                 tcp_sysctls: dict | None = None, queue_budget: int = QUEUE_BUDGET):
        self.t = t
        self.queue_budget = queue_budget     # the largest apply_tm may use (sizes the sockets)
        self.tcp_sysctls = dict(tcp_sysctls or {})   # over TCP_SYSCTLS, on every host
        tc = discover()
        self.sw_path = sw_path or tc.simple_switch_grpc
        if not self.sw_path:
            raise FabricError("simple_switch_grpc not found (coflow.dataplane.toolchain)")
        self.run_dir = run_dir or tempfile.mkdtemp(prefix=f"{MARKER}-")
        os.makedirs(self.run_dir, exist_ok=True)
        self.log_level = log_level
        self.switch_nice = switch_nice
        self.net = None
        self.tm_applied: dict[str, tm.TmConfig] = {}

    # bring-up --------------------------------------------------------------------------------------
    def start(self) -> "Fabric":
        from ..sysdeps import mininet_missing
        why = mininet_missing()
        if why:
            raise FabricError(why)
        from mininet.link import Link
        from mininet.net import Mininet

        from .nodes import BMv2Switch, EmuHost
        clash = conflicting_interfaces(self.t)
        if clash:
            raise FabricError(f"interfaces already exist ({', '.join(clash[:4])}...): another fabric "
                              "is up; stop it or run `coflow emu clean`")
        net = Mininet(topo=None, build=False, controller=None, link=Link, autoSetMacs=False,
                      autoStaticArp=False, waitConnected=False)
        self.net = net
        for h in self.t.hosts:
            net.addHost(h.name, cls=EmuHost, ip=f"{h.ip}/8", mac=h.mac, tcp_sysctls=self.tcp_sysctls)
        for s in self.t.switches:
            net.addSwitch(s.name, cls=BMv2Switch, device_id=s.device_id, sw_path=self.sw_path,
                          run_dir=self.run_dir, log_level=self.log_level, nice=self.switch_nice,
                          sndbuf=port_sndbuf(self.queue_budget))
        for h in self.t.hosts:
            net.addLink(h.name, h.switch, port1=0, port2=h.port)
        for l in self.t.links:
            net.addLink(l.a, l.b, port1=l.a_port, port2=l.b_port)
        try:
            net.build()
            switch_offloads_off(self.egress_interfaces())
            for s in net.switches:
                s.start([])
            static_arp(net.hosts, self.t)
        except BaseException:
            self.stop()
            raise
        return self

    def switch_addrs(self) -> dict[str, str]:
        return {s.name: s.grpc_addr for s in self.net.switches}

    def link_stats(self) -> dict[str, int]:
        """Kernel counters summed over every switch-side interface (cumulative; callers take
        differences): rx_packets are the frames the kernel delivered towards BMv2, so
        rx_packets - BMv2's enqueued packets is what was lost between the kernel and the switch
        process (its capture socket's buffer overflowing while the process is short of CPU)."""
        keys = ("rx_packets", "rx_dropped", "tx_packets", "tx_dropped")
        out = dict.fromkeys(keys, 0)
        for dev in self.egress_interfaces():
            for k in keys:
                try:
                    with open(f"/sys/class/net/{dev}/statistics/{k}") as f:
                        out[k] += int(f.read())
                except (OSError, ValueError):
                    pass
        return out

    def queue_stats(self, p4info_path: str) -> dict:
        """Packets per BMv2 priority summed over every switch and port, read over P4Runtime
        (read-only channels: the mode's controller stays primary): ``enq`` (the pipeline handed
        them to BMv2's queues), ``deq`` (they left them), ``bmv2_dropped`` = enq - deq (BMv2's
        own queues overflowed: a switch process short of CPU), ``pipeline_dropped`` (meter
        RED). Index = priority 0..7. ``ecn_marked``: frames marked CE, all ports (their queues);
        ``meter_marked``: frames the meters marked CE (YELLOW), all meters. A switch that cannot
        be read is listed in ``unread``."""
        from ..dataplane.p4rt import P4InfoHelper, P4RuntimeClient, P4RuntimeError
        info = P4InfoHelper.from_file(p4info_path)
        names = {"enq": "CoflowIngress.stamp.queue_enq", "deq": "CoflowEgress.queue_stats.queue_deq",
                 "pipeline_dropped": "CoflowIngress.queue_stats.queue_drop"}
        out = {k: [0] * 8 for k in names}
        out["ecn_marked"] = 0
        out["meter_marked"] = 0
        unread = []
        for s in self.net.switches:
            c = P4RuntimeClient(s.grpc_addr, device_id=s.device_id, p4info=info)
            try:
                c.connect_reader(timeout=5.0)
                for key, counter in names.items():
                    for e in c.read(c.counter_entity(counter)):
                        ce = e.counter_entry
                        out[key][ce.index.index % 8] += ce.data.packet_count
                for e in c.read(c.counter_entity("CoflowEgress.ecn_marker.ecn_marked")):
                    out["ecn_marked"] += e.counter_entry.data.packet_count
                for e in c.read(c.counter_entity("CoflowIngress.flow_meter.meter_marked")):
                    out["meter_marked"] += e.counter_entry.data.packet_count
            except P4RuntimeError:
                unread.append(s.name)
            finally:
                c.close()
        out["bmv2_dropped"] = [a - b for a, b in zip(out["enq"], out["deq"])]
        out["unread"] = unread
        return out

    def switch_pids(self) -> dict[str, int | None]:
        return {s.name: s.pid() for s in self.net.switches}

    def restart_switches(self) -> None:
        """Fresh BMv2 processes (empty tables, counters, registers) on the same interfaces."""
        for s in self.net.switches:
            s.stop_process()
        for s in self.net.switches:
            s.start([])

    def host(self, name: str):
        return self.net.get(name)

    # traffic manager -------------------------------------------------------------------------------
    def egress_interfaces(self) -> list[str]:
        return [s.intf(p) for s in self.t.switches for p in s.ports]

    def apply_tm(self, plan: TmPlan, rate_kbit: int, budget: int | None = None,
                 class_floor: float = 0.0) -> tm.TmConfig:
        budget = self.queue_budget if budget is None else budget
        if budget > self.queue_budget:
            raise FabricError(f"queue budget {budget} > the {self.queue_budget} frames the "
                              "switches' sockets were sized for (Fabric(queue_budget=...))")
        cfg = tm_config(plan, rate_kbit, budget, class_floor)
        devs = self.egress_interfaces()
        # one `tc -batch` for every port (thousands of tc processes otherwise); the removal of
        # the previous mode's trees may fail where there was none (-force goes on)
        path = os.path.join(self.run_dir, "tm-clear.batch")
        with open(path, "w") as f:
            f.write("".join(" ".join(c[1:]) + "\n" for dev in devs for c in tm.clear_commands(dev)))
        subprocess.run(["tc", "-force", "-batch", path], capture_output=True)
        lines = [" ".join(cmd[1:]) for dev in devs for cmd in tm_commands(dev, cfg)]
        path = os.path.join(self.run_dir, "tm.batch")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run(["tc", "-batch", path], capture_output=True, text=True)
        if r.returncode != 0:
            raise FabricError(f"tc -batch {path}: {r.stderr.strip().splitlines()[:1]}")
        for dev in devs:
            self.tm_applied[dev] = cfg
        return cfg

    def tm_stats(self) -> dict[str, dict[str, dict[str, int]]]:
        return {dev: tm.class_stats(dev) for dev in self.tm_applied}

    # teardown --------------------------------------------------------------------------------------
    def stop(self) -> None:
        net, self.net = self.net, None
        if net is None:
            return
        for s in net.switches:
            try:
                s.stop_process()
            except Exception:  # noqa: BLE001 (teardown goes on whatever one switch does)
                pass
        try:
            net.stop()
        except Exception:  # noqa: BLE001 (as above: the interfaces are removed next anyway)
            pass
        cleanup_interfaces(self.t)

    def remove_run_dir(self) -> None:
        shutil.rmtree(self.run_dir, ignore_errors=True)


def cleanup_interfaces(t: topo.Topology) -> list[str]:
    """Delete the veths of ``t`` that are still there (one end deletes the pair)."""
    gone = []
    for dev in conflicting_interfaces(t):
        r = subprocess.run(["ip", "link", "del", dev], capture_output=True)
        if r.returncode == 0:
            gone.append(dev)
    return gone


def stray_switches(marker: str = MARKER) -> list[int]:
    """PIDs of simple_switch_grpc processes started by an emulation (their ipc address carries
    the marker)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"simple_switch_grpc") and any(marker.encode() in a for a in argv):
            pids.append(int(d))
    return pids
