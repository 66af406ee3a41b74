"""Threshold crossings pushed by the edges (issue 29): the report digests of p4src's report.p4.

Each edge reports a coordinated coflow's byte counter when a packet moves it across a multiple
of the slot's report *step* (a power of two the controller writes into ``report_step``, one
entry per assigned slot): one digest ``{slot, external_id, internal_id, bytes}`` (Tofino:
64-byte units) from the crossing packet, none from the packets before and after it. So
between two digests of a slot the counter stays inside one step: the controller knows every
edge's count *rounded down to the step* without reading it, and the D-CLAS round in digest mode
(setting ``digest=1``) runs on those rounded counts, from pushes or from a poll alike
(:func:`quantise`). On one pipe the two give the same counts (hence the same demotions): a
poll reads a count c and rounds it to floor(c / step) * step; the last digest carried the count
just after the last boundary crossed, which rounds to the same multiple. (An edge whose ports
span pipes is several counting domains, each pushing its own share: "Pipes" below.) Steps only grow (a coflow's queue
only rises; :class:`ReportSteps`), and a coarser power of two's multiples are multiples of the
finer one, so a digest sent under the old step rounds right under the new one.

The error of the rounding: each domain's count (an edge's, or an edge pipe's) is at most one
step below its true count, so a coflow's global size at most ``domains`` steps below. :class:`ReportSteps` sizes the step so
that this is at most 1/``precision`` of the coflow's current D-CLAS band.

What is pushed is lost if the stream breaks or the server drops a list; the controller then
polls (:class:`DigestInbox.take` says when): on a new connection (the digest is configured
again, nothing before it was reported), on a gap in a digest's ``list_id`` (PI numbers the
lists of each digest 1, 2, 3, ... and never skips one: proto/frontend/src/digest_mgr.cpp), and
after a malformed digest (dropped with one error line; what it carried is unknown). Besides,
each edge is polled every ``digest_resync_s`` (a slow clock, one edge per round).

Pipes (Tofino): every Register and Counter has one copy per pipe, so a coflow whose packets
enter an edge through ports of two pipes is counted twice, a share in each, and each pipe's
report digests carry that pipe's count (the TNA digest's ``port`` member, the SDK ingress
port, whose bits 8:7 are its pipe; BMv2 has one pipe and no such member). An inbox keeps the highest count per (slot, pipe) and reports a slot's sum over
its pipes (max within a pipe, sum across pipes: every (edge, pipe) is a counting domain, as
several edges are); a poll of the edge's ``coflow_bytes`` counter reads the sum over the pipes
(the servers add the pipes' copies of a counter), so a polled count is a floor under the
pushed sums (:meth:`DigestInbox.polled`). The data plane of a pipe decides from its own share:
on an edge whose host ports span pipes the controller's override carries every decision
(:attr:`coflow.ctl.coord.DclasCoordinator.split_edges`).

Staleness: the learn filter of a Tofino drops a digest whose entry is already in its filter
until the filter is cleared (``learn_timeout``), and no ``list_id`` is skipped for it, so no gap
shows the loss. A slot's pushed count then lags until its next crossing, or until the edge's
resync poll: less than ``digest_resync_s`` + edges x the round interval (each edge's turn on the
slow clock comes every edges rounds, and it is polled at the first turn ``digest_resync_s``
after its last poll); within one report step per domain otherwise. Polls that moved a count a
report step or more past what the digests gave are counted (:attr:`DigestRounds.corrections`, the
Prometheus counter ``coflow_ctl_digest_resync_corrections_total``; a report step per pipe, as
each pipe's share may lag by less than a step).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from ..params import DclasParams
from ..tofino.tm import pipe_of
from . import model as M

log = logging.getLogger(__name__)

#: the report digest's struct (p4src report.p4) and its members, in order
DIGEST_NAME = "report_digest_t"
MEMBERS = ("slot", "external_id", "internal_id")   # then "bytes" (v1model) or "units" (TNA)
COUNT_MEMBERS = {"bytes": 0, "units": None}        # name -> unit shift (None: the target's)
PORT_MEMBER = "port"                               # TNA: the SDK ingress port, last (v1model: none)


class DigestError(ValueError):
    """A digest the controller cannot use (one line: what and why)."""


@dataclass(frozen=True)
class DigestFormat:
    """The report digest as the P4Info declares it."""
    digest_id: int
    widths: tuple       # bit widths of slot, external_id, internal_id, count
    unit_shift: int     # the count is in 2^unit_shift-byte units

    @classmethod
    def from_p4info(cls, p4info, unit_shift: int = 0) -> "DigestFormat | None":
        """None when the program has no report digest (an older pipeline: poll only)."""
        for d in p4info.digests:   # v1model names it by the struct, TNA by the Digest instance
            if d.type_spec.struct.name != DIGEST_NAME:
                continue
            st = p4info.type_info.structs.get(d.type_spec.struct.name)
            if st is None:
                raise DigestError(f"P4Info: digest {DIGEST_NAME}'s struct is not in type_info")
            names = [m.name for m in st.members]
            if tuple(names[:3]) != MEMBERS or len(names) not in (4, 5) \
                    or names[3] not in COUNT_MEMBERS or names[4:] not in ([], [PORT_MEMBER]):
                raise DigestError(f"P4Info: digest {DIGEST_NAME} has members {names}, "
                                  f"expected {list(MEMBERS)} + bytes|units [+ port]")
            widths = tuple(m.type_spec.bitstring.bit.bitwidth for m in st.members)
            shift = COUNT_MEMBERS[names[3]]
            return cls(d.preamble.id, widths, unit_shift if shift is None else shift)
        return None

    def decode(self, data) -> tuple:
        """One P4Data of a DigestList -> (slot, (external, internal), bytes, pipe): the pipe of
        the ``port`` member (Tofino 1: the SDK port's bits 8:7, :func:`coflow.tofino.tm.pipe_of`),
        0 without one; DigestError when it is not a struct of the declared members and
        widths. (The data plane sends the port, not the pipe: bf-p4c cannot pack into a digest
        a field the parser wrote at another in-byte alignment, and the port's bits 8:7 sit at
        bit 7.)"""
        if data.WhichOneof("data") != "struct":
            raise DigestError(f"digest data is a {data.WhichOneof('data')}, not a struct")
        mem = data.struct.members
        if len(mem) != len(self.widths):
            raise DigestError(f"digest struct has {len(mem)} members, expected {len(self.widths)}")
        vals = []
        for i, (m, w) in enumerate(zip(mem, self.widths)):
            if m.WhichOneof("data") != "bitstring":
                raise DigestError(f"digest member {i} is not a bitstring")
            b = m.bitstring
            v = int.from_bytes(b, "big")
            if not b or len(b) > (w + 7) // 8 or v >> w:
                raise DigestError(f"digest member {i} ({b.hex() or 'empty'}) is not a {w}-bit value")
            vals.append(v)
        return vals[0], (vals[1], vals[2]), vals[3] << self.unit_shift, \
            (pipe_of(vals[4]) if len(vals) > 4 else 0)


def quantise(nbytes: int, step: int) -> int:
    """A count rounded down to its slot's report step (a power of two)."""
    return int(nbytes) & ~(int(step) - 1)


class ReportSteps:
    """The report step of a coflow in D-CLAS queue ``q``: the largest power of two (at least
    the target's counting unit) no larger than the queue's band (Q1 for queue 1, then
    T_q - T_{q-1}) divided by ``edges * precision``, so the rounding costs the global size at
    most 1/``precision`` of that band. The last queue reuses the band before it."""

    def __init__(self, params: DclasParams, edges: int, unit_shift: int = 0, precision: int = 8):
        th = [float(t) for t in params.thresholds()]
        bands = [th[0]] + [b - a for a, b in zip(th, th[1:])]
        bands.append(bands[-1])
        floor = 1 << unit_shift
        self.steps = []
        for band in bands:
            s = max(1, int(band // (max(1, edges) * precision)))
            self.steps.append(max(floor, 1 << (s.bit_length() - 1)))
        for a, b in zip(self.steps, self.steps[1:]):   # coarsening only (queues only rise)
            if b < a:
                raise ValueError("D-CLAS bands must not shrink: report steps would get finer")
        self.unit_shift = unit_shift

    def step(self, queue: int) -> int:
        return self.steps[min(max(int(queue), 1), len(self.steps)) - 1]

    def mask(self, step: int, width: int) -> int:
        """``report_step``'s parameter: ~(step - 1) in the target's unit, ``width`` bits."""
        return ((1 << width) - 1) & ~((step >> self.unit_shift) - 1)


def report_entity(slot: int, mask: int) -> M.TableEntry:
    return M.TableEntry(M.T_REPORT, (("slot", int(slot)),), M.A_SET_STEP, M.params(mask=mask))


class DigestInbox:
    """One switch's report digests, from its stream's thread to the round: decoded, acked,
    merged per slot (the highest count of each pipe, summed over the pipes; a poll's count a
    floor under the sum), with the reasons to poll the switch instead."""

    def __init__(self, name: str, fmt: DigestFormat):
        self.name = name
        self.fmt = fmt
        self.owner: dict = {}           # slot -> (external, internal): set by the controller
        self._lock = threading.Lock()
        self._got: set = set()          # slots pushed since the last take
        self._pipes: dict = {}          # slot -> (owner, {pipe: highest bytes})
        self._floor: dict = {}          # slot -> (owner, bytes of the last poll: every pipe)
        self._last_list: int | None = None
        self._resync = "connected"      # why the next take asks for a poll ("" none)
        self.enabled = True
        self.lists = self.entries = self.errors = self.missed = self.stale = 0

    def connected(self) -> None:
        """A new connection (the digest configured again): poll before trusting pushes."""
        with self._lock:
            self._got = set()
            self._pipes = {}
            self._floor = {}
            self._last_list = None
            self._resync = "connected"
            self.enabled = True

    def resync(self, why: str) -> None:
        """Ask the next take for a poll (the view was built some other way)."""
        with self._lock:
            self._resync = self._resync or why

    def disable(self) -> None:
        """The switch refused the digest's configuration: every take asks for a poll."""
        with self._lock:
            self.enabled = False

    def on_list(self, msg, ack=None) -> None:
        """A DigestList (the stream's thread): acked (``ack(digest_id, list_id)``) whatever it
        holds; entries merged; malformed ones dropped with one error line each."""
        if msg.digest_id != self.fmt.digest_id:
            log.error("%s: digest list of unknown digest id %d dropped", self.name, msg.digest_id)
            with self._lock:
                self.errors += 1
            return
        if ack is not None:
            ack(msg.digest_id, msg.list_id)
        got = []
        bad = 0
        for data in msg.data:
            try:
                slot, cid, nbytes, pipe = self.fmt.decode(data)
            except DigestError as exc:
                log.error("%s: digest list %d: %s: dropped", self.name, msg.list_id, exc)
                bad += 1
                continue
            own = self.owner.get(slot)
            if own is None:
                log.error("%s: digest list %d: unknown slot %d: dropped", self.name, msg.list_id, slot)
                bad += 1
                continue
            if own != cid:   # the slot's previous coflow, before it was re-assigned: stale
                self.stale += 1
                continue
            got.append((slot, own, pipe, nbytes))
        with self._lock:
            self.lists += 1
            self.entries += len(got)
            self.errors += bad
            last = self._last_list
            if last is not None and msg.list_id != last + 1:
                self.missed += 1
                log.warning("%s: digest list %d after %d: lists missed, polling", self.name,
                            msg.list_id, last)
                self._resync = self._resync or "gap"
            self._last_list = msg.list_id
            if bad:
                self._resync = self._resync or "malformed"
            pipes = self._pipes
            for slot, own, pipe, nbytes in got:
                cur = pipes.get(slot)
                if cur is None or cur[0] != own:   # the slot's first count for this owner
                    cur = pipes[slot] = (own, {})
                if nbytes > cur[1].get(pipe, -1):
                    cur[1][pipe] = nbytes
                    self._got.add(slot)

    def polled(self, counts: dict) -> list:
        """A poll's counts (slot -> bytes, every pipe's share together): the floor of the
        slots' pushed sums from now on (the owner's bytes only grow). Returns [(slot, what the
        digests had given, the polled bytes, the pipes that pushed it)] of the slots the
        digests had given a count."""
        out = []
        with self._lock:
            own = self.owner
            for slot, nbytes in counts.items():
                o = own.get(slot)
                if o is None:
                    continue
                cur, fl = self._pipes.get(slot), self._floor.get(slot)
                pipes = len(cur[1]) if cur is not None and cur[0] == o else 0
                if pipes or (fl is not None and fl[0] == o):
                    out.append((slot, self._count(slot), int(nbytes), max(1, pipes)))
                self._floor[slot] = (o, int(nbytes))
        return out

    def _count(self, slot: int) -> int:
        own = self.owner.get(slot)
        cur = self._pipes.get(slot)
        total = sum(cur[1].values()) if cur is not None and cur[0] == own else 0
        fl = self._floor.get(slot)
        return max(total, fl[1]) if fl is not None and fl[0] == own else total

    def take(self) -> tuple[dict, str]:
        """(slot -> bytes (summed over the pipes) of the slots pushed since the last take, why
        to poll this switch now or "")."""
        with self._lock:
            slots, self._got = self._got, set()
            got = {s: self._count(s) for s in slots}
            why, self._resync = self._resync, ""
            if not self.enabled:
                why = "disabled"
            return got, why


class DigestRounds:
    """The D-CLAS round's side of the report digests (setting ``digest``): which edges to poll
    this round and what the others pushed, the report steps to write, and the rounding of
    every count the coordinator sees (pushed or polled alike)."""

    def __init__(self, fmt: DigestFormat, params: DclasParams, edges: list, unit_shift: int,
                 report_slots: int, resync_s: float, width: int, domains: int = 0):
        """``domains``: the counting domains, (edge, pipe) pairs (0: one per edge)."""
        self.fmt = fmt
        self.steps_of = ReportSteps(params, domains or len(edges), unit_shift)
        self.edges = list(edges)
        self.report_slots = report_slots
        self.resync_s = resync_s
        self.width = width              # report_step mask's bit width (the P4Info's)
        self.steps: dict = {}           # slot -> report step in bytes (what the switches hold)
        self._owner: dict = {}          # slot -> the coflow its step was chosen for
        self.coarsened: set = set()     # slots whose step grew since the last requantise()
        self._entities: dict = {}       # key -> report_step entity
        self._polled_at: dict = {}      # edge -> monotonic time of its last poll
        self._rr = 0
        self.polls: dict = {}           # why -> edges polled for it
        self.observed = 0               # pushed counts handed to the coordinator
        self.corrections = 0            # polled counts a report step or more past the digests'

    def inbox(self, name: str) -> DigestInbox:
        return DigestInbox(name, self.fmt)

    def set_owners(self, agents, slots: dict) -> None:
        """``slots``: cid -> slot of the coordinated coflows (the inboxes' owner check)."""
        owner = {s: tuple(c) for c, s in slots.items() if s < self.report_slots}
        for a in agents:
            if a.digests is not None:
                a.digests.owner = owner

    def corrected(self, seen: list) -> int:
        """How many of a poll's counts (:meth:`DigestInbox.polled`) the poll moved past what
        the digests had given by a report step per pipe or more (a crossing whose digest was
        lost: each pipe's pushed share may lag its count by less than a step)."""
        st = self.steps
        n = sum(1 for slot, pushed, polled, pipes in seen if slot in st
                and quantise(polled, st[slot]) - quantise(pushed, st[slot]) >= pipes * st[slot])
        self.corrections += n
        return n

    def quantise(self, counts: dict) -> dict:
        st = self.steps
        return {i: quantise(b, st[i]) if i in st else int(b) for i, b in counts.items()}

    def collect(self, agents: list, now: float) -> tuple[dict, list]:
        """(edge -> rounded pushed counts, the agents to poll this round): an edge is polled
        when its inbox says so (new connection, missed list, malformed digest, disabled), and
        one edge per round whose last poll is ``resync_s`` old (the slow clock)."""
        pushed: dict = {}
        poll: list = []
        for a in agents:
            got, why = a.digests.take() if a.digests is not None else ({}, "no inbox")
            if why:
                poll.append(a)
                self.polls[why] = self.polls.get(why, 0) + 1
                continue
            if got:
                pushed[a.name] = self.quantise(got)
                self.observed += len(got)
        if self.resync_s > 0 and agents:
            for _ in range(len(agents)):
                a = agents[self._rr % len(agents)]
                self._rr += 1
                if a in poll:
                    continue
                if now - self._polled_at.get(a.name, -float("inf")) >= self.resync_s:
                    poll.append(a)
                    self.polls["clock"] = self.polls.get("clock", 0) + 1
                break
        for a in poll:
            self._polled_at[a.name] = now
        return pushed, poll

    def requantise(self, coord) -> None:
        """Round the coordinator's counts of the slots whose step grew to the new step (what
        a poll would now give; the data plane's next digest of them comes at a multiple of it)."""
        if not self.coarsened:
            return
        co, st = self.coarsened, self.steps
        for key in [k for k in coord.last if k[1] in co]:
            coord.last[key] = quantise(coord.last[key], st[key[1]])
            coord.local_changed(key[0])
        self.coarsened = set()

    #: slots whose step may grow in one round (x edges entries written)
    COARSEN_PER_ROUND = 2

    def entities(self, slots: dict, queues: dict, quiet: bool = True) -> dict:
        """The report component (the same on every edge): a step per coordinated slot. A new
        slot (or one given to another coflow) gets its queue's step at once: its first
        crossings must be reported. The others' steps grow with their queues only in a
        ``quiet`` round (one that writes no override: a demotion round writes no report
        entries), at most COARSEN_PER_ROUND slots a round, so that no round writes them all."""
        want = {s: c for c, s in slots.items() if s < self.report_slots}
        budget = self.COARSEN_PER_ROUND if quiet else 0
        steps, own = self.steps, self._owner
        changed = False
        for s in [s for s in steps if s not in want]:
            del steps[s], own[s]
            changed = True
        for s, c in want.items():
            q = self.steps_of.step(queues.get(c, 1))
            old = steps.get(s)
            fresh = old is None or own[s] != c
            if fresh or (budget > 0 and q > (old or 0)):
                if not fresh:
                    self.coarsened.add(s)
                    budget -= 1
                steps[s], own[s] = q, c
                changed = True
        if changed or len(self._entities) != len(steps):
            self._entities = {e.key: e for e in (
                report_entity(s, self.steps_of.mask(st, self.width)) for s, st in steps.items())}
        return self._entities
