"""Desired state: what one switch should hold, as plain immutable values keyed by identity.

Values are named tuples: cheap to build, hash and compare (in C; a round compares and
creates thousands of them). Equality is the tuple's; no two entity kinds
have the same arity and field types (Member and Group, both of four fields, differ in the
third: an action name vs a tuple of member ids), so values of different kinds never compare
equal.

No protobuf here: the translation layer (:mod:`coflow.ctl.translate`) builds these values from
the topology, the mode and the scheduler's Allocation; :mod:`coflow.ctl.codec` turns them into
P4Runtime entities and read-back entities into them; :func:`diff` compares two states and
returns the writes that turn one into the other, in an order the switch accepts.

Identity (``key``) follows P4Runtime's: a table entry is its table, match and priority; a
member / group its profile and id; a meter config its meter and index; a default action its
table. Values are ints (addresses already converted); match values are ``int`` (exact),
``(value, prefix_len)`` (LPM), ``(low, high)`` (range) or ``(value, mask)`` (ternary).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Union

# P4Info full names (the codec resolves them; tests check they exist in the compiled P4Info)
T_PORT_ROLE = "CoflowIngress.config.port_role"
T_CONFIG = "CoflowIngress.config.pipeline_config"
T_ROUTING = "CoflowIngress.routing.routing_v4"
T_ECMP_WINDOW = "CoflowIngress.routing.ecmp_window"   # the switch's ECMP hash window
T_SLOT = "CoflowIngress.coflow_counter.coflow_slot"
T_DCLAS = "CoflowIngress.dclas.dclas_thresholds"
T_OVERRIDE = "CoflowIngress.override.coflow_override"
T_UNTAGGED = "CoflowIngress.default_class.untagged_class"
T_FLOW_METER = "CoflowIngress.flow_meter.flow_meter"
T_ECN_PORT = "CoflowEgress.ecn_marker.ecn_port"
T_REPORT = "CoflowIngress.report.report_step"   # report digests' steps (ctl/digest.py)
A_SET_ROLE = "CoflowIngress.config.set_role"
A_SET_CONFIG = "CoflowIngress.config.set_config"
A_NEXT_HOP = "CoflowIngress.routing.set_next_hop"
A_ECMP_WINDOW = "CoflowIngress.routing.set_ecmp_window"
A_SET_SLOT = "CoflowIngress.coflow_counter.set_slot"
A_DCLAS_QUEUE = "CoflowIngress.dclas.set_queue"
A_OVERRIDE_QUEUE = "CoflowIngress.override.set_queue"
A_SET_CLASS = "CoflowIngress.default_class.set_class"
A_SET_METER = "CoflowIngress.flow_meter.set_meter"
A_SET_VQ = "CoflowEgress.ecn_marker.set_vq"
A_SET_STEP = "CoflowIngress.report.set_step"
P_ECMP = "CoflowIngress.routing.ecmp_selector"
C_COFLOW_BYTES = "CoflowIngress.coflow_counter.coflow_bytes"
C_COLLISIONS = "CoflowIngress.coflow_counter.slot_collisions"
C_TAKEOVERS = "CoflowIngress.coflow_counter.slot_takeovers"
C_RED_DROPS = "CoflowIngress.flow_meter.meter_red_drops"
C_FLOW_BYTES = "CoflowIngress.flow_meter.flow_bytes"
C_METER_MARKED = "CoflowIngress.flow_meter.meter_marked"
C_DROP_REASONS = "CoflowIngress.queue_stats.drop_reasons"
C_QUEUE_DROP = "CoflowIngress.queue_stats.queue_drop"
C_ECN_MARKED = "CoflowEgress.ecn_marker.ecn_marked"
M_FLOW = "CoflowIngress.flow_meter.flow_meters"

# Tables whose entries the controller owns entirely: anything else found there is deleted.
MANAGED_TABLES = (T_PORT_ROLE, T_ROUTING, T_SLOT, T_DCLAS, T_OVERRIDE, T_UNTAGGED, T_FLOW_METER,
                  T_ECN_PORT, T_REPORT)
DEFAULT_TABLES = (T_CONFIG, T_ECMP_WINDOW)  # tables whose default action the controller writes

Params = tuple  # ((name, int), ...) sorted by name


def params(**kw) -> Params:
    return tuple(sorted((k, int(v)) for k, v in kw.items()))


class TableEntry(NamedTuple):
    table: str
    match: tuple  # ((field, value), ...) sorted by field
    action: str | None = None
    params: Params = ()
    priority: int = 0
    member_id: int | None = None
    group_id: int | None = None

    @property
    def key(self):
        return ("table", self.table, self.match, self.priority)


class DefaultAction(NamedTuple):
    table: str
    action: str
    params: Params = ()

    @property
    def key(self):
        return ("default", self.table)


class Member(NamedTuple):
    profile: str
    member_id: int
    action: str
    params: Params = ()

    @property
    def key(self):
        return ("member", self.profile, self.member_id)


class Group(NamedTuple):
    profile: str
    group_id: int
    members: tuple[int, ...]  # sorted member ids, weight 1 each
    max_size: int = 0

    @property
    def key(self):
        return ("group", self.profile, self.group_id)


class MeterConfig(NamedTuple):
    """A MeterEntry's config: rates in units per second (bytes/s for a bytes meter), bursts in
    units (bytes). Absent from a state = the meter is unconfigured (every packet GREEN)."""
    meter: str
    index: int
    cir: int
    cburst: int
    pir: int
    pburst: int

    @property
    def key(self):
        return ("meter", self.meter, self.index)


class CounterReset(NamedTuple):
    """Not state: a one-off write that zeroes one index of an indirect counter. The diff emits
    it right before inserting or re-pointing a ``coflow_slot`` entry (the mirror counter of a
    slot the controller (re)assigns must start at 0, as the data plane's register does) and a
    ``flow_meter`` entry (``flow_bytes`` of a meter index the pool hands to a new flow starts
    at 0: the controller reads it as that flow's progress)."""
    counter: str
    index: int

    @property
    def key(self):
        return ("counter", self.counter, self.index)


Entity = Union[TableEntry, DefaultAction, Member, Group, MeterConfig]


@dataclass
class SwitchState:
    """Entities of one switch by key. Equality of two states = equality of their dicts."""
    entities: dict = field(default_factory=dict)

    @classmethod
    def of(cls, items: Iterable[Entity]) -> "SwitchState":
        s = cls()
        for e in items:
            s.add(e)
        return s

    def add(self, e: Entity) -> None:
        old = self.entities.get(e.key)
        if old is not None and old != e:
            raise ValueError(f"conflicting desired entities for {e.key}: {old} vs {e}")
        self.entities[e.key] = e

    def merge_keyed(self, keyed: dict) -> None:
        """Add entities already keyed (``{e.key: e}``) without per-entity checks: the caller
        guarantees they do not collide with what is there (e.g. meters vs table entries)."""
        self.entities.update(keyed)

    def update(self, items: Iterable[Entity]) -> None:
        for e in items:
            self.add(e)

    def copy(self) -> "SwitchState":
        return SwitchState(dict(self.entities))

    def __len__(self) -> int:
        return len(self.entities)

    # (list() copies the items at once: a switch's cache is updated in place by the write
    # phase while another thread may look at it)
    def of_kind(self, kind: str) -> list:
        return [e for k, e in list(self.entities.items()) if k[0] == kind]

    def table(self, name: str) -> list[TableEntry]:
        return [e for k, e in list(self.entities.items()) if k[0] == "table" and k[1] == name]


# Write ordering ------------------------------------------------------------------------------
# Deletes of table entries first (nothing references a table entry, and a full table, e.g.
# coflow_slot with every slot in use, must make room before a departed coflow's slot is
# inserted for a new one). Then inserts and modifies: members, then groups (they reference
# members), then table entries (they reference members or groups), defaults, meters. Then the
# other deletes: groups, members, meters (resets) last. Inside a phase the ops are sorted by
# key: the order is canonical, the same whether the diff looked at every key (:func:`diff`) or
# only at the keys that changed since the last sync (:func:`diff_keys`).
_ORDER = {"member": 0, "group": 1, "table": 2, "default": 3, "meter": 4}
_DEL_ORDER = {"table": 0, "group": 1, "member": 2, "meter": 3}


class Op(NamedTuple):
    """One update (a named tuple: a round creates hundreds, a frozen dataclass costs 5x)."""
    type: str  # INSERT | MODIFY | DELETE
    entity: object  # an Entity, or a CounterReset (type MODIFY); a MeterConfig DELETE resets it

    def __str__(self):
        return f"{self.type} {self.entity.key}"


def diff(desired: SwitchState, actual: SwitchState,
         managed_tables: Iterable[str] = MANAGED_TABLES) -> list[Op]:
    """Writes that turn ``actual`` into ``desired``, ordered for one batch: deletes of table
    entries; inserts/modifies of members, groups, table entries, defaults, meters; then deletes
    of groups, members, meters; by key inside each phase. Table entries in tables the
    controller does not manage and default actions it has no opinion on are left alone. A
    ``coflow_slot`` entry that is inserted, or modified to another slot, is preceded by a reset
    of that slot's counter; a ``flow_meter`` entry likewise by a reset of its ``flow_bytes``."""
    want, have = desired.entities, actual.entities
    keys = [k for k, v in want.items() if have.get(k) is not v]
    keys += [k for k in have if k not in want]
    return diff_keys(desired, actual, keys, managed_tables)


def diff_keys(desired: SwitchState, actual: SwitchState, keys: Iterable,
              managed_tables: Iterable[str] = MANAGED_TABLES) -> list[Op]:
    """:func:`diff` restricted to ``keys``. When ``actual`` held every entity of an earlier
    desired state (a successful sync) and ``keys`` holds every key whose desired entity changed
    since (added, modified, removed), this equals the full :func:`diff` (the controller's
    incremental path; the tests check the equality on random histories)."""
    managed = managed_tables if isinstance(managed_tables, (set, frozenset)) else set(managed_tables)
    want, have_all = desired.entities, actual.entities
    ups: list = []
    dels: list = []
    for key in keys:
        w = want.get(key)
        h = have_all.get(key)
        if w is not None:
            if h is w or h == w:
                continue
            ups.append((_ORDER[key[0]], key, w, h))
        elif h is not None:
            kind = key[0]
            if kind == "default":
                continue  # the controller only rewrites defaults it wants; nothing to delete
            if kind == "table" and h.table not in managed:
                continue
            dels.append((_DEL_ORDER[kind], key, h))
    ups.sort(key=_phase_key)
    dels.sort(key=_phase_key)
    # table entries' deletes first (phase 0 of _DEL_ORDER), the other deletes last
    nfirst = 0
    while nfirst < len(dels) and dels[nfirst][0] == 0:
        nfirst += 1
    out: list[Op] = [Op("DELETE", h) for _, _, h in dels[:nfirst]]
    for _, key, w, h in ups:
        kind = key[0]
        if kind == "table" and w.table == T_SLOT:
            slot = dict(w.params).get("slot")
            if h is None or dict(h.params).get("slot") != slot:
                out.append(Op("MODIFY", CounterReset(C_COFLOW_BYTES, slot)))
        elif kind == "table" and w.table == T_FLOW_METER:
            index = dict(w.params).get("index")
            if h is None or dict(h.params).get("index") != index:
                out.append(Op("MODIFY", CounterReset(C_FLOW_BYTES, index)))
        out.append(Op("INSERT" if h is None and kind not in ("default", "meter") else "MODIFY", w))
    out += [Op("DELETE", h) for _, _, h in dels[nfirst:]]
    return out


def _phase_key(t):
    return t[0], t[1]


def batches(ops: list) -> list[list]:
    """``ops`` (one :func:`diff`) split into the Writes that must follow one another: a
    P4Runtime server may apply a batch's updates in any order (P4Runtime specification,
    "Batching and Ordering of Updates": dependent updates go in separate Writes, each sent when
    the one before succeeded). ``report_step`` entries written (inserted or modified) come in a
    Write before the rest, and ``report_step`` entries deleted in a Write after it: a
    ``coflow_slot`` entry must not point a coflow at a slot whose ``report_step`` entry is
    missing, or the data plane's shadow count of that slot (TNA report.p4) misses the restart
    when the coflow claims it and every report of the coflow is off by the slot's old count.
    Inside each Write the order of :func:`diff` is kept. Without ``report_step`` writes beside
    others: one Write."""
    first = [op for op in ops if op.type != "DELETE" and _is_report(op)]
    last = [op for op in ops if op.type == "DELETE" and _is_report(op)]
    if not first and not last:
        return [ops] if ops else []
    middle = [op for op in ops if not _is_report(op)]
    return [b for b in (first, middle, last) if b]


def _is_report(op) -> bool:
    k = op.entity.key
    return k[0] == "table" and k[1] == T_REPORT


def apply_ops(state: SwitchState, ops: Iterable[Op]) -> SwitchState:
    """The state a switch holds after ``ops`` succeeded (the controller's cache)."""
    return apply_ops_inplace(state.copy(), ops)


def apply_ops_inplace(out: SwitchState, ops: Iterable[Op]) -> SwitchState:
    """:func:`apply_ops` on ``out`` itself (no copy of a large cache per write)."""
    for op in ops:
        e = op.entity
        if isinstance(e, CounterReset):
            continue
        if op.type == "DELETE":
            out.entities.pop(e.key, None)
        else:
            out.entities[e.key] = e
    return out
