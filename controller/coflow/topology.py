"""Fabric topologies: generators, the topology file format, routes with ECMP, cut capacity.

A topology file (``topologies/*.json``, format ``coflow-topology/1``) lists hosts (with the trace
port number each one plays, its address and where it attaches), switches (role, whether it is an
edge, P4Runtime device id, BMv2 port numbers) and switch-to-switch links. The controller installs
:func:`routes` from it, the emulation builds the Mininet fabric from it, and both name interfaces
the Mininet way: port ``p`` of switch ``s`` is ``s-ethp``.

Generators:
- :func:`fattree` ``(k)``: Al-Fares et al.'s k-ary fat-tree, k pods of k/2 edge and k/2
  aggregation switches, (k/2)^2 cores, k^3/4 hosts; full bisection bandwidth with equal link rates.
- :func:`leafspine` ``(leaves, spines, hosts_per_leaf)``: a two-tier Clos; non-blocking when
  ``spines >= hosts_per_leaf`` (oversubscription ``hosts_per_leaf / spines`` otherwise).
- :func:`bigswitch` ``(hosts)``: one switch, the simulator's fabric model.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import sys
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Iterable

FORMAT = "coflow-topology/1"
KINDS = ("fattree", "leafspine", "bigswitch")
ROLES = ("edge", "agg", "core", "leaf", "spine", "switch")
_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_NAME = re.compile(r"^[a-z][a-z0-9]{0,9}$")  # short: Mininet interface names are <= 15 chars


class TopologyError(ValueError):
    """A malformed topology file: ``path: field: problem``."""


@dataclass(frozen=True)
class Host:
    name: str
    index: int  # the trace port this host plays
    ip: str
    mac: str
    switch: str
    port: int  # the switch port it attaches to

    @property
    def intf(self) -> str:
        return f"{self.name}-eth0"


@dataclass(frozen=True)
class Switch:
    name: str
    role: str
    edge: bool
    device_id: int
    mac: str
    ports: tuple[int, ...]

    def intf(self, port: int) -> str:
        return f"{self.name}-eth{port}"


@dataclass(frozen=True)
class Link:
    a: str
    a_port: int
    b: str
    b_port: int


@dataclass(frozen=True)
class NextHop:
    port: int
    dmac: str


@dataclass(frozen=True)
class Route:
    prefix: str  # "10.0.0.1/32"
    next_hops: tuple[NextHop, ...]  # several = ECMP

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(h.port for h in self.next_hops)


@dataclass
class Topology:
    name: str
    kind: str
    params: dict
    hosts: list[Host]
    switches: list[Switch]
    links: list[Link]
    _idx: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        self._idx = {
            "host": {h.name: h for h in self.hosts},
            "ip": {h.ip: h for h in self.hosts},
            "index": {h.index: h for h in self.hosts},
            "switch": {s.name: s for s in self.switches},
            "port": {},
        }
        for h in self.hosts:
            self._idx["port"][(h.switch, h.port)] = ("host", h)
        for l in self.links:
            self._idx["port"][(l.a, l.a_port)] = ("switch", l.b, l.b_port)
            self._idx["port"][(l.b, l.b_port)] = ("switch", l.a, l.a_port)

    # lookups ---------------------------------------------------------------------------------
    def host(self, name: str) -> Host:
        return self._idx["host"][name]

    def host_by_ip(self, ip: str) -> Host:
        return self._idx["ip"][ip]

    def host_by_index(self, i: int) -> Host:
        return self._idx["index"][i]

    def switch(self, name: str) -> Switch:
        return self._idx["switch"][name]

    def edge_switches(self) -> list[Switch]:
        return [s for s in self.switches if s.edge]

    def neighbor(self, switch: str, port: int):
        """``("host", Host)`` or ``("switch", Switch, peer_port)``; None for an unused port."""
        n = self._idx["port"].get((switch, port))
        if n is None or n[0] == "host":
            return n
        return ("switch", self.switch(n[1]), n[2])

    def host_ports(self, switch: str) -> list[int]:
        return sorted(h.port for h in self.hosts if h.switch == switch)

    def fabric_ports(self, switch: str) -> list[int]:
        return sorted(p for (s, p), n in self._idx["port"].items() if s == switch and n[0] == "switch")

    def hosts_of(self, switch: str) -> list[Host]:
        return [h for h in self.hosts if h.switch == switch]

    # serialisation ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "format": FORMAT, "name": self.name, "kind": self.kind, "params": self.params,
            "hosts": [asdict(h) for h in self.hosts],
            "switches": [{**asdict(s), "ports": list(s.ports)} for s in self.switches],
            "links": [asdict(l) for l in self.links],
        }

    def save(self, path: str) -> None:
        """Atomic: a temporary file renamed over ``path``."""
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")
        os.replace(tmp, path)

    def summary(self) -> dict:
        roles: dict[str, int] = {}
        for s in self.switches:
            roles[s.role] = roles.get(s.role, 0) + 1
        return {"name": self.name, "kind": self.kind, "params": self.params, "hosts": len(self.hosts),
                "switches": len(self.switches), "roles": roles, "links": len(self.links),
                "edge_switches": len(self.edge_switches())}


# generators --------------------------------------------------------------------------------------
def _host(i: int, switch: str, port: int) -> Host:
    ip = ipaddress.IPv4Address(int(ipaddress.IPv4Address("10.0.0.1")) + i)
    b = ip.packed
    return Host(f"h{i}", i, str(ip), "02:00:%02x:%02x:%02x:%02x" % tuple(b), switch, port)


def _switch(name: str, role: str, edge: bool, device_id: int, nports: int) -> Switch:
    return Switch(name, role, edge, device_id, "02:00:00:00:%02x:%02x" % divmod(device_id, 256),
                  tuple(range(1, nports + 1)))


def fattree(k: int = 4) -> Topology:
    """k pods; edge i of pod p is ``e{p*k/2+i}`` with hosts on ports 1..k/2 and aggregation
    switch j of its pod on port k/2+1+j; aggregation j of pod p (``a{p*k/2+j}``) has edge i on
    port 1+i and core j*k/2+m on port k/2+1+m; core c has pod p's aggregation on port p+1."""
    if not isinstance(k, int) or k < 2 or k % 2:
        raise ValueError(f"fat-tree k must be an even integer >= 2, got {k!r}")
    h = k // 2
    switches: list[Switch] = []
    hosts: list[Host] = []
    links: list[Link] = []
    dev = 1
    for p in range(k):
        for i in range(h):
            e = f"e{p * h + i}"
            switches.append(_switch(e, "edge", True, dev, k)); dev += 1
            for m in range(h):
                hosts.append(_host(len(hosts), e, 1 + m))
    for p in range(k):
        for j in range(h):
            switches.append(_switch(f"a{p * h + j}", "agg", False, dev, k)); dev += 1
    for c in range(h * h):
        switches.append(_switch(f"c{c}", "core", False, dev, k)); dev += 1
    for p in range(k):
        for i in range(h):
            for j in range(h):
                links.append(Link(f"e{p * h + i}", h + 1 + j, f"a{p * h + j}", 1 + i))
        for j in range(h):
            for m in range(h):
                links.append(Link(f"a{p * h + j}", h + 1 + m, f"c{j * h + m}", p + 1))
    return Topology(f"fattree-k{k}", "fattree", {"k": k}, hosts, switches, links)


def leafspine(leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 4) -> Topology:
    """Leaf l (``l{l}``): hosts on ports 1..hosts_per_leaf, spine s on port hosts_per_leaf+1+s;
    spine s (``s{s}``): leaf l on port l+1."""
    for n, v in (("leaves", leaves), ("spines", spines), ("hosts_per_leaf", hosts_per_leaf)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"leaf-spine {n} must be an integer >= 1, got {v!r}")
    switches, hosts, links = [], [], []
    dev = 1
    for l in range(leaves):
        switches.append(_switch(f"l{l}", "leaf", True, dev, hosts_per_leaf + spines)); dev += 1
        for m in range(hosts_per_leaf):
            hosts.append(_host(len(hosts), f"l{l}", 1 + m))
    for s in range(spines):
        switches.append(_switch(f"s{s}", "spine", False, dev, leaves)); dev += 1
        for l in range(leaves):
            links.append(Link(f"l{l}", hosts_per_leaf + 1 + s, f"s{s}", l + 1))
    return Topology(f"leafspine-{leaves}x{spines}x{hosts_per_leaf}", "leafspine",
                    {"leaves": leaves, "spines": spines, "hosts_per_leaf": hosts_per_leaf},
                    hosts, switches, links)


def bigswitch(hosts: int = 16) -> Topology:
    if not isinstance(hosts, int) or hosts < 1:
        raise ValueError(f"big switch hosts must be an integer >= 1, got {hosts!r}")
    sw = _switch("s0", "switch", True, 1, hosts)
    return Topology(f"bigswitch-{hosts}", "bigswitch", {"hosts": hosts},
                    [_host(i, "s0", i + 1) for i in range(hosts)], [sw], [])


GENERATORS = {"fattree": fattree, "leafspine": leafspine, "bigswitch": bigswitch}


# routes ---------------------------------------------------------------------------------------------
def _adjacency(t: Topology) -> dict[str, list[tuple[int, str]]]:
    adj: dict[str, list[tuple[int, str]]] = {s.name: [] for s in t.switches}
    for l in t.links:
        adj[l.a].append((l.a_port, l.b))
        adj[l.b].append((l.b_port, l.a))
    return adj


def _distances(adj: dict[str, list[tuple[int, str]]], src: str) -> dict[str, int]:
    dist = {src: 0}
    q = deque([src])
    while q:
        u = q.popleft()
        for _, v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def routes(t: Topology) -> dict[str, list[Route]]:
    """One /32 route per host on every switch. A switch the host hangs off sends to the host's
    port; any other switch sends over every port whose neighbour is one hop closer to the host's
    switch (equal-cost shortest paths: ECMP). Next hops are sorted by port."""
    adj = _adjacency(t)
    out: dict[str, list[Route]] = {s.name: [] for s in t.switches}
    for home in {h.switch for h in t.hosts}:
        dist = _distances(adj, home)
        for h in t.hosts:
            if h.switch != home:
                continue
            for s in t.switches:
                if s.name == home:
                    hops = (NextHop(h.port, h.mac),)
                elif s.name not in dist:
                    continue  # disconnected: no route
                else:
                    hops = tuple(sorted(
                        (NextHop(p, t.switch(v).mac) for p, v in adj[s.name]
                         if dist.get(v, -1) == dist[s.name] - 1),
                        key=lambda nh: nh.port))
                out[s.name].append(Route(f"{h.ip}/32", hops))
    for s in out:
        out[s].sort(key=lambda r: ipaddress.IPv4Network(r.prefix))
    return out


def layers(t: Topology) -> dict[str, int]:
    """Each switch's layer: its hop distance from the nearest switch with hosts (edges 0; a
    fat-tree's aggregations 1 and cores 2; a leaf-spine's spines 1). A switch no host reaches
    is layer 0."""
    adj = _adjacency(t)
    out = {s.name: None for s in t.switches}
    for home in {h.switch for h in t.hosts}:
        for name, d in _distances(adj, home).items():
            if out[name] is None or d < out[name]:
                out[name] = d
    return {name: d or 0 for name, d in out.items()}


def paths(t: Topology, src: str, dst: str, table: dict[str, list[Route]] | None = None) -> list[list[str]]:
    """Every switch path a packet from host ``src`` to host ``dst`` can take by following the
    route table (all ECMP choices)."""
    table = table if table is not None else routes(t)
    s, d = t.host(src), t.host(dst)
    pfx = f"{d.ip}/32"
    out: list[list[str]] = []

    def walk(sw: str, path: list[str]):
        if len(path) > len(t.switches):
            raise RuntimeError(f"routing loop from {src} to {dst}: {path}")
        r = next((r for r in table[sw] if r.prefix == pfx), None)
        if r is None:
            return
        for nh in r.next_hops:
            n = t.neighbor(sw, nh.port)
            if n is None:
                continue
            if n[0] == "host":
                if n[1].name == dst:
                    out.append(path)
            else:
                walk(n[1].name, path + [n[1].name])

    walk(s.switch, [s.switch])
    return out


def cut_capacity(t: Topology, side: Iterable[str]) -> int:
    """Max flow (in link units, every link carrying 1 per direction) from the hosts in ``side``
    to all other hosts: by max-flow/min-cut, the capacity of the narrowest cut between them."""
    side = set(side)
    src_n, dst_n = "__src", "__dst"
    cap: dict[str, dict[str, int]] = {}

    def add(u, v, c):
        cap.setdefault(u, {}).setdefault(v, 0)
        cap.setdefault(v, {}).setdefault(u, 0)
        cap[u][v] += c

    for l in t.links:
        add(l.a, l.b, 1)
        add(l.b, l.a, 1)
    for h in t.hosts:
        add(h.name, h.switch, 1)
        add(h.switch, h.name, 1)
        if h.name in side:
            add(src_n, h.name, 1)
        else:
            add(h.name, dst_n, 1)
    flow = 0
    while True:  # Edmonds-Karp: shortest augmenting paths, unit steps
        prev = {src_n: None}
        q = deque([src_n])
        while q and dst_n not in prev:
            u = q.popleft()
            for v, c in cap[u].items():
                if c > 0 and v not in prev:
                    prev[v] = u
                    q.append(v)
        if dst_n not in prev:
            return flow
        v = dst_n
        while prev[v] is not None:
            u = prev[v]
            cap[u][v] -= 1
            cap[v][u] += 1
            v = u
        flow += 1


# loading ---------------------------------------------------------------------------------------------
def _need(d: dict, key: str, typ, where: str, path: str):
    if not isinstance(d, dict):
        raise TopologyError(f"{path}: {where}: expected an object")
    if key not in d:
        raise TopologyError(f"{path}: {where}.{key}: missing")
    v = d[key]
    if typ is int and (isinstance(v, bool) or not isinstance(v, int)):
        raise TopologyError(f"{path}: {where}.{key}: expected an integer, got {v!r}")
    if typ is not int and not isinstance(v, typ):
        raise TopologyError(f"{path}: {where}.{key}: expected {getattr(typ, '__name__', typ)}, got {v!r}")
    return v


def from_dict(d: dict, path: str = "<topology>") -> Topology:
    """Validate strictly; the first problem raises ``TopologyError("path: field: problem")``."""
    if not isinstance(d, dict):
        raise TopologyError(f"{path}: top level: expected an object")
    fmt = _need(d, "format", str, "top", path)
    if fmt != FORMAT:
        raise TopologyError(f"{path}: format: expected {FORMAT!r}, got {fmt!r}")
    name = _need(d, "name", str, "top", path)
    kind = _need(d, "kind", str, "top", path)
    if kind not in KINDS:
        raise TopologyError(f"{path}: kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    params = d.get("params", {})
    if not isinstance(params, dict):
        raise TopologyError(f"{path}: params: expected an object")
    switches: list[Switch] = []
    seen: dict[str, set] = {"name": set(), "device_id": set(), "mac": set(), "ip": set()}
    for i, s in enumerate(_need(d, "switches", list, "top", path)):
        w = f"switches[{i}]"
        nm = _need(s, "name", str, w, path)
        if not _NAME.match(nm):
            raise TopologyError(f"{path}: {w}.name: {nm!r} must match {_NAME.pattern} (Mininet interface names)")
        role = _need(s, "role", str, w, path)
        if role not in ROLES:
            raise TopologyError(f"{path}: {w}.role: expected one of {', '.join(ROLES)}, got {role!r}")
        edge = _need(s, "edge", bool, w, path)
        dev = _need(s, "device_id", int, w, path)
        if dev < 0 or dev >= 2 ** 64:
            raise TopologyError(f"{path}: {w}.device_id: out of range")
        mac = _need(s, "mac", str, w, path).lower()
        if not _MAC.match(mac):
            raise TopologyError(f"{path}: {w}.mac: not a MAC address: {mac!r}")
        ports = _need(s, "ports", list, w, path)
        if not ports or any(isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 510 for p in ports) \
                or len(set(ports)) != len(ports):
            raise TopologyError(f"{path}: {w}.ports: expected distinct port numbers in 1..510")
        for key, val in (("name", nm), ("device_id", dev), ("mac", mac)):
            if val in seen[key]:
                raise TopologyError(f"{path}: {w}.{key}: duplicate {val!r}")
            seen[key].add(val)
        switches.append(Switch(nm, role, edge, dev, mac, tuple(ports)))
    if not switches:
        raise TopologyError(f"{path}: switches: empty")
    sw = {s.name: s for s in switches}
    used: set[tuple[str, int]] = set()

    def port_ok(where: str, s: str, p):
        if s not in sw:
            raise TopologyError(f"{path}: {where}: unknown switch {s!r}")
        if p not in sw[s].ports:
            raise TopologyError(f"{path}: {where}: switch {s} has no port {p!r}")
        if (s, p) in used:
            raise TopologyError(f"{path}: {where}: port {s}:{p} used twice")
        used.add((s, p))

    hosts: list[Host] = []
    for i, h in enumerate(_need(d, "hosts", list, "top", path)):
        w = f"hosts[{i}]"
        nm = _need(h, "name", str, w, path)
        if not _NAME.match(nm):
            raise TopologyError(f"{path}: {w}.name: {nm!r} must match {_NAME.pattern}")
        if nm in seen["name"]:
            raise TopologyError(f"{path}: {w}.name: duplicate {nm!r}")
        seen["name"].add(nm)
        idx = _need(h, "index", int, w, path)
        ip = _need(h, "ip", str, w, path)
        try:
            ipaddress.IPv4Address(ip)
        except ValueError:
            raise TopologyError(f"{path}: {w}.ip: not an IPv4 address: {ip!r}") from None
        if ip in seen["ip"]:
            raise TopologyError(f"{path}: {w}.ip: duplicate {ip!r}")
        seen["ip"].add(ip)
        mac = _need(h, "mac", str, w, path).lower()
        if not _MAC.match(mac):
            raise TopologyError(f"{path}: {w}.mac: not a MAC address: {mac!r}")
        if mac in seen["mac"]:
            raise TopologyError(f"{path}: {w}.mac: duplicate {mac!r}")
        seen["mac"].add(mac)
        s = _need(h, "switch", str, w, path)
        p = _need(h, "port", int, w, path)
        port_ok(f"{w}.port", s, p)
        hosts.append(Host(nm, idx, ip, mac, s, p))
    if not hosts:
        raise TopologyError(f"{path}: hosts: empty")
    idxs = sorted(h.index for h in hosts)
    if idxs != list(range(len(hosts))):
        raise TopologyError(f"{path}: hosts: index must number the hosts 0..{len(hosts) - 1} (trace ports)")
    links: list[Link] = []
    for i, l in enumerate(_need(d, "links", list, "top", path)):
        w = f"links[{i}]"
        a, ap = _need(l, "a", str, w, path), _need(l, "a_port", int, w, path)
        b, bp = _need(l, "b", str, w, path), _need(l, "b_port", int, w, path)
        if a == b:
            raise TopologyError(f"{path}: {w}: a switch linked to itself")
        port_ok(f"{w}.a_port", a, ap)
        port_ok(f"{w}.b_port", b, bp)
        links.append(Link(a, ap, b, bp))
    t = Topology(name, kind, params, hosts, switches, links)
    adj = _adjacency(t)
    homes = {h.switch for h in hosts}
    reach = _distances(adj, next(iter(homes)))
    lost = sorted(homes - set(reach))
    if lost:
        raise TopologyError(f"{path}: links: switch {lost[0]} is not connected to the others' hosts")
    return t


def load(path: str) -> Topology:
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise TopologyError(f"{path}: {e.strerror}") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise TopologyError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    return from_dict(d, path)


# CLI -------------------------------------------------------------------------------------------------
def _cmd_gen(args) -> int:
    if args.kind == "fattree":
        t = fattree(args.k)
    elif args.kind == "leafspine":
        t = leafspine(args.leaves, args.spines, args.hosts_per_leaf)
    else:
        t = bigswitch(args.hosts)
    t.save(args.output)
    print(json.dumps(t.summary()))
    return 0


def _cmd_show(args) -> int:
    try:
        t = load(args.file)
    except TopologyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s = t.summary()
    if args.routes:
        s["routes"] = {sw: {r.prefix: list(r.ports) for r in rs}
                       for sw, rs in routes(t).items() if args.routes == "all" or sw == args.routes}
    print(json.dumps(s, indent=1))
    return 0


def add_commands(sub) -> None:
    tp = sub.add_parser("topo", help="fabric topologies (fat-tree, leaf-spine, big switch)")
    ts = tp.add_subparsers(dest="topocmd", required=True)
    g = ts.add_parser("gen", help="write a topology file")
    g.add_argument("kind", choices=KINDS)
    g.add_argument("--k", type=int, default=4, help="fat-tree arity (even)")
    g.add_argument("--leaves", type=int, default=2)
    g.add_argument("--spines", type=int, default=2)
    g.add_argument("--hosts-per-leaf", type=int, default=4)
    g.add_argument("--hosts", type=int, default=16, help="big switch ports")
    g.add_argument("-o", "--output", required=True)
    g.set_defaults(fn=_cmd_gen)
    s = ts.add_parser("show", help="validate a topology file and print its counts (and routes)")
    s.add_argument("file")
    s.add_argument("--routes", metavar="SWITCH|all", help="also print the route table")
    s.set_defaults(fn=_cmd_show)
