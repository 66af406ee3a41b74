"""Ports on a Tofino switch: the topology's port numbers, P4Runtime's, and the SDK's.

The TNA program's port type is translated for P4Runtime (``@p4runtime_translation("tna/PortId_t",
32) type bit<9> tna_port_t``, p4src/tna/include/metadata.p4, the pattern of stratum/fabric-tna
``p4src/shared/define.p4``): the value in a table entry is the server's port name, which the
server maps to the SDK device port the pipeline sees (``ig_intr_md.ingress_port``).

- **Stratum** (``--experimental_enable_p4runtime_translation``) maps a singleton port id of its
  chassis config to the SDK port (stratum/stratum
  ``stratum/hal/lib/barefoot/bfrt_p4runtime_translator.cc``: ``TranslateTnaPortId`` for the
  ``tna/PortId_t`` URI, its map built by ``PushChassisConfig`` from the singleton ports'
  slot/port/channel, ``GetPortIdFromPortKey``): the controller writes the topology's port number,
  which must be the singleton port's ``id`` in the chassis config; its QoS section names the
  port the same way (``QueueConfig.port``, :mod:`coflow.tofino.tm`).
- **bf_switchd**'s P4Runtime server translates nothing (PI's ``device_mgr.cpp`` reads no
  ``translated_type``; bf-drivers' ``pi_tables_imp.c`` sizes a key from the P4Info's bitwidth),
  so a 32-bit translated port would reach the 9-bit key as 4 bytes. bf_switchd runs its own build
  of the program, ``build/tofino-bf_switchd`` (``-DTNA_UNTRANSLATED_PORTS``: ``tna_port_t`` is
  9 bits, untranslated), and the controller writes the SDK device port itself: :class:`PortMap`
  (a file, ``--tofino-port-map``) maps each switch's topology ports to SDK ports; without one
  the SDK port is the topology port (tofino-model's veth ports 0.. are SDK ports 0..). The
  traffic manager's tables are keyed by SDK port too. :func:`check_build` refuses a P4Info built
  for the other server.

Counters indexed by port in the data plane (``queue_enq`` etc. at ``port * 8 + class``,
``ecn_marked``) see SDK ports on both servers: :meth:`PortMap.sdk_port`.

File format (JSON)::

    {"format": "coflow-tofino-ports/1",
     "switches": {"leaf1": {"1": 132, "2": 140}, ...}}

A switch or port not listed keeps its topology number.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..ctl import model as M

FORMAT = "coflow-tofino-ports/1"
SDK_PORT_BITS = 9                    # PortId_t on Tofino 1
P4RT_PORT_BITS = 32                  # the translated width (tna/PortId_t, 32)
TRANSLATED_PORT_URI = "tna/PortId_t"
#: server -> (make p4-tofino's build directory under build/, whether its ports are translated)
BUILDS = {"stratum": ("tofino", True), "bf_switchd": ("tofino-bf_switchd", False)}
#: the entities that hold a port: (P4Info kind, controller name, field or parameter)
PORT_FIELDS = (("tables", M.T_PORT_ROLE, "ingress_port"), ("tables", M.T_ECN_PORT, "egress_port"),
               ("actions", M.A_NEXT_HOP, "port"))
#: match fields and action parameters of the controller's entities that hold a port
PORT_MATCH_FIELDS = ("ingress_port", "egress_port")
PORT_PARAMS = ("port",)


@dataclass(frozen=True)
class PortMap:
    """switch -> {topology port: SDK device port}."""
    sdk: dict = field(default_factory=dict)

    def sdk_port(self, switch: str, port: int) -> int:
        return int(self.sdk.get(switch, {}).get(int(port), int(port)))

    def p4rt_port(self, switch: str, port: int, server: str) -> int:
        """The value P4Runtime carries for a topology port: the port itself under Stratum (its
        chassis config's singleton port id, translated by Stratum), the SDK port under
        bf_switchd."""
        if server == "stratum":
            return int(port)
        if server == "bf_switchd":
            return self.sdk_port(switch, port)
        raise ValueError(f"unknown Tofino server {server!r}")


def check_build(p4info, server: str, where: str = "P4Info") -> None:
    """Raise ValueError (one line) unless the port fields of ``p4info`` (a
    :class:`coflow.dataplane.p4rt.P4InfoHelper`) are as ``server`` carries them: translated
    (``tna/PortId_t``, 32 bits) for Stratum, the SDK port's 9 bits untranslated for bf_switchd."""
    if server not in BUILDS:
        raise ValueError(f"unknown Tofino server {server!r}")
    build, translated = BUILDS[server]
    new_types = p4info.p4info.type_info.new_types
    for kind, name, fname in PORT_FIELDS:
        try:
            obj = p4info.get(kind, name)
        except KeyError:
            raise ValueError(f"{where}: no {kind[:-1]} {name}") from None
        fields = obj.match_fields if kind == "tables" else obj.params
        f = next((x for x in fields if x.name == fname), None)
        if f is None:
            raise ValueError(f"{where}: {name} has no {fname}")
        nt = new_types.get(f.type_name.name) if f.type_name.name else None
        uri = nt.translated_type.uri if nt is not None and nt.HasField("translated_type") else None
        want = (TRANSLATED_PORT_URI, P4RT_PORT_BITS) if translated else (None, SDK_PORT_BITS)
        if (uri, f.bitwidth) != want:
            got = f"translated ({uri}), {f.bitwidth} bits" if uri else f"untranslated, {f.bitwidth} bits"
            raise ValueError(f"{where}: {name}.{fname} is {got}; {server} needs the build in "
                             f"build/{build} (make p4-tofino)")


def load(path: str | None, topo=None) -> PortMap:
    """Read a port map file (None: the identity). With ``topo``, every switch and port it
    names must be the topology's. Errors: ValueError with the file and what is wrong."""
    if path is None:
        return PortMap()
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    return parse(doc, path, topo)


def parse(doc, where: str = "port map", topo=None) -> PortMap:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{where}: expected an object with \"format\": \"{FORMAT}\"")
    sws = doc.get("switches")
    if not isinstance(sws, dict):
        raise ValueError(f"{where}: \"switches\" must be an object of switch -> {{port: sdk port}}")
    known = {s.name: set(s.ports) for s in topo.switches} if topo is not None else None
    out: dict = {}
    for sw, ports in sws.items():
        if known is not None and sw not in known:
            raise ValueError(f"{where}: switch {sw!r} is not in the topology")
        if not isinstance(ports, dict):
            raise ValueError(f"{where}: switch {sw!r}: expected an object of port -> sdk port")
        m: dict = {}
        for k, v in ports.items():
            try:
                p = int(k)
            except ValueError:
                raise ValueError(f"{where}: switch {sw!r}: port {k!r} is not a number") from None
            if known is not None and p not in known[sw]:
                raise ValueError(f"{where}: switch {sw!r} has no port {p} in the topology")
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << SDK_PORT_BITS:
                raise ValueError(f"{where}: switch {sw!r} port {p}: SDK port {v!r} is not in "
                                 f"0..{(1 << SDK_PORT_BITS) - 1}")
            m[p] = v
        if len(set(m.values())) != len(m):
            raise ValueError(f"{where}: switch {sw!r}: two ports map to one SDK port")
        out[sw] = m
    return PortMap(out)


def map_entity(ent, fn):
    """``ent`` with every port-valued match field and parameter passed through ``fn``."""
    if isinstance(ent, M.TableEntry):
        match = tuple((k, fn(v) if k in PORT_MATCH_FIELDS else v) for k, v in ent.match)
        prm = tuple((k, fn(v) if k in PORT_PARAMS else v) for k, v in ent.params)
        return ent._replace(match=match, params=prm) if (match, prm) != (ent.match, ent.params) else ent
    if isinstance(ent, M.Member):
        prm = tuple((k, fn(v) if k in PORT_PARAMS else v) for k, v in ent.params)
        return ent._replace(params=prm) if prm != ent.params else ent
    return ent


def apply(state: dict, pm: PortMap, server: str) -> dict:
    """Static state (switch -> entities, ``coflow.ctl.translate.static_state``) with ports as
    ``server``'s P4Runtime names them."""
    return {sw: [map_entity(e, lambda p, sw=sw: pm.p4rt_port(sw, p, server)) for e in ents]
            for sw, ents in state.items()}


def edge_pipes(topology, pm: PortMap | None = None) -> dict:
    """edge switch -> the pipes (Tofino 1: SDK port >> 7) of its host ports. Every Register
    and Counter has a copy per pipe: an edge whose host ports span pipes counts a coflow once
    per pipe, each copy a share (docs/explanation/queue-mapping.md)."""
    from .tm import pipe_of
    pm = pm or PortMap()
    out: dict = {}
    for h in topology.hosts:
        out.setdefault(h.switch, set()).add(pipe_of(pm.sdk_port(h.switch, h.port)))
    return {e: frozenset(p) for e, p in out.items()}
