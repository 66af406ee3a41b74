"""Coflow state per pipe on Tofino: every Register and Counter has a copy per pipe, so a coflow
whose packets enter an edge through ports of two pipes is counted in each, a share apiece.

``PipedEdge`` is a fake edge that keeps that state per pipe and answers as the real servers do
(p4src/README.md, "What the fakes enforce"):
- a read of an indexed Counter (``coflow_bytes``) returns the sum over the pipes: bf-drivers
  ``pipe_mgr_stat_mgr_ent_query`` (src/pipe_mgr/pipe_mgr_stat_tbl_mgr.c) adds every pipe of the
  table instance's pipe bitmap, for PI's ``_pi_counter_read`` (src/pi/pi_counter_imp.c) and for
  Stratum's ``BfSdeWrapper::ReadIndirectCounter`` (hal/lib/barefoot/bf_sde_wrapper.cc) alike;
- a Register read over BF Runtime returns one value per pipe (bf-drivers
  ``BfRtRegisterTable::tableEntryGet``, src/bf_rt/bf_rt_p4/bf_rt_p4_table_impl.cpp: one
  ``pipe_stful_mem_spec_t`` per pipe from ``pipeStfulEntQuery``); Stratum's
  ``BfSdeWrapper::ReadRegisters`` keeps the first (``register_data[0]``: pipe 0's); bf_switchd's
  P4Runtime server has no registers (src/pi implements none);
- a report digest comes from the pipe that counted the packet and, on TNA, says which
  (p4src/tna report_digest_t ``port``, the SDK ingress port, whose bits 8:7 are the pipe: the
  P4Runtime DigestList carries no pipe).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from coflow.ctl.coord import DclasCoordinator
from coflow.ctl.digest import DigestError, DigestFormat, DigestInbox, DigestRounds, quantise
from coflow.dataplane.pb import p4data_pb2, p4runtime_pb2 as pb
from coflow.params import DclasParams, hw_priority
from coflow.tofino import ports
from coflow.tofino.tm import pipe_of

#: the TNA digest's shape: slot, external_id, internal_id, units, port
WIDTHS = (16, 32, 8, 32, 16)
FMT = DigestFormat(digest_id=9, widths=WIDTHS, unit_shift=6)


class RegisterReadUnsupported(Exception):
    """bf_switchd's P4Runtime server: no register reads (src/pi has no register functions)."""


class PipedEdge:
    """One Tofino edge: per-pipe byte registers (in 64-byte units) and the report rule of
    report.p4 run per pipe."""

    def __init__(self, pipes: int = 4, step: int = 1 << 14):
        self.pipes = pipes
        self.units = [dict() for _ in range(pipes)]     # pipe -> slot -> 64-byte units
        self.step = step
        self.out: list = []
        self.list_id = 0
        self.learned: set = set()     # the learn filter: (pipe, slot, units) held until cleared

    def packet(self, port: int, slot: int, cid, nbytes: int) -> None:
        pipe = pipe_of(port)
        if pipe >= self.pipes:
            raise ValueError(f"port {port}: pipe {pipe} does not exist")
        u = self.units[pipe]
        before = u.get(slot, 0)
        after = before + nbytes // 64
        u[slot] = after
        mask = ~((self.step >> 6) - 1)
        if (before & mask) != (after & mask):
            key = (pipe, slot, after)
            if key not in self.learned:    # the learn filter drops what it holds: no list gap
                self.out.append(self._data(slot, cid, after, port))

    def _data(self, slot, cid, units, port):
        d = p4data_pb2.P4Data()
        for v, w in zip((slot, cid[0], cid[1], units, port), WIDTHS):
            d.struct.members.add().bitstring = v.to_bytes((w + 7) // 8, "big")
        return d

    def flush(self):
        if not self.out:
            return None
        self.list_id += 1
        m = pb.DigestList(digest_id=FMT.digest_id, list_id=self.list_id)
        for d in self.out:
            m.data.add().CopyFrom(d)
        self.out = []
        return m

    # the servers' reads -------------------------------------------------------------------
    def read_counter(self, slot: int) -> int:
        """coflow_bytes[slot] over P4Runtime (PI or Stratum) or BF Runtime with all pipes: the
        sum over the pipes."""
        return sum(u.get(slot, 0) for u in self.units) << 6

    def read_register(self, server: str, slot: int):
        if server == "bfrt":
            return [u.get(slot, 0) for u in self.units]   # one value per pipe
        if server == "stratum":
            return self.units[0].get(slot, 0)             # register_data[0]
        if server == "bf_switchd":
            raise RegisterReadUnsupported("P4Runtime RegisterEntry: unimplemented")
        raise ValueError(server)


def test_the_fake_answers_as_the_servers_do():
    e = PipedEdge()
    e.packet(3, 5, (1, 0), 6400)        # pipe 0
    e.packet(130, 5, (1, 0), 640)       # pipe 1
    assert e.read_counter(5) == 7040
    assert e.read_register("bfrt", 5) == [100, 10, 0, 0]
    assert e.read_register("stratum", 5) == 100
    with pytest.raises(RegisterReadUnsupported):
        e.read_register("bf_switchd", 5)
    with pytest.raises(ValueError, match="pipe 4"):
        e.packet(4 << 7, 5, (1, 0), 64)


def _history(seed: int, pipes=(0, 1)):
    """A random history of one coflow on one edge's ports of ``pipes``: the edge, the inbox fed
    its digests, the step."""
    rng = random.Random(seed)
    step = 1 << 14
    e = PipedEdge(step=step)
    ib = DigestInbox("e0", FMT)
    ib.owner = {5: (1, 0)}
    ib.take()
    for _ in range(400):
        e.packet((rng.choice(pipes) << 7) + rng.randrange(8), 5, (1, 0), 64 * rng.randrange(1, 24))
        if rng.random() < 0.2:
            m = e.flush()
            if m is not None:
                ib.on_list(m)
    m = e.flush()
    if m is not None:
        ib.on_list(m)
    return e, ib, step


@pytest.mark.parametrize("seed", range(20))
def test_pushed_counts_of_two_pipes_agree_with_the_poll(seed):
    """Max within a pipe, sum across: the pushed count is at most one step per pipe below the
    poll (which reads the sum); merged by max over the pipes it would lose a pipe's share."""
    e, ib, step = _history(seed)
    got, why = ib.take()
    assert why == ""
    polled = e.read_counter(5)
    pushed = got[5]
    assert pushed <= polled
    assert quantise(polled, step) - pushed < 2 * step, (polled, pushed)


def test_a_pipe_member_is_declared_or_absent_and_decoded():
    e = PipedEdge()
    e.packet(200, 5, (1, 0), 1 << 15)
    m = e.flush()
    assert FMT.decode(m.data[0]) == (5, (1, 0), (1 << 15), 1)
    v1 = DigestFormat(1, (32, 32, 8, 64), 0)
    d = p4data_pb2.P4Data()
    for v, w in zip((5, 1, 0, 99), v1.widths):
        d.struct.members.add().bitstring = v.to_bytes((w + 7) // 8, "big")
    assert v1.decode(d) == (5, (1, 0), 99, 0)         # BMv2: one pipe
    with pytest.raises(DigestError, match="5 members, expected 4"):
        v1.decode(m.data[0])


def test_a_poll_is_a_floor_and_a_lost_digest_is_a_counted_correction():
    step = 1 << 14
    e = PipedEdge(step=step)
    ib = DigestInbox("e0", FMT)
    ib.owner = {5: (1, 0)}
    ib.take()
    e.packet(1, 5, (1, 0), step)              # pipe 0 crosses one step: pushed
    e.packet(129, 5, (1, 0), step)            # pipe 1 too
    ib.on_list(e.flush())
    assert ib.take()[0] == {5: 2 * step}
    e.learned.add((0, 5, (3 * step) >> 6))    # the learn filter drops pipe 0's next crossing
    e.packet(1, 5, (1, 0), 2 * step)
    assert e.flush() is None                  # nothing sent, no list id skipped
    assert ib.take() == ({}, "")
    rounds = DigestRounds(FMT, DclasParams(), ["e0"], 6, 16, 1.0, 32, domains=2)
    rounds.steps[5] = step
    seen = ib.polled({5: e.read_counter(5)})
    assert seen == [(5, 2 * step, 4 * step, 2)]
    assert rounds.corrected(seen) == 1 and rounds.corrections == 1
    e.packet(129, 5, (1, 0), 64)              # pipe 1 pushes nothing new: the floor holds
    e.packet(129, 5, (1, 0), step)            # pipe 1 crosses again: its share grows
    ib.on_list(e.flush())
    assert ib.take()[0] == {5: 4 * step}      # max(poll 4 steps, pushed 1 + 2 + ...) per pipe
    assert rounds.corrected(ib.polled({5: e.read_counter(5)})) == 0


def test_the_resync_clock_bounds_the_staleness():
    """Every edge is polled again less than resync_s + edges x the round interval after its
    last poll, with nothing pushed in between (a lost digest shows no gap)."""
    import types
    for n, dt, resync in ((3, 0.1, 1.0), (8, 0.25, 0.5), (1, 1.0, 0.3)):
        r = DigestRounds(FMT, DclasParams(), [f"e{i}" for i in range(n)], 6, 16, resync, 32)
        agents = [types.SimpleNamespace(name=f"e{i}", digests=DigestInbox(f"e{i}", FMT))
                  for i in range(n)]
        last: dict = {}
        worst = 0.0
        for k in range(400):
            now = k * dt
            _, poll = r.collect(agents, now)
            for a in poll:
                if a.name in last:
                    worst = max(worst, now - last[a.name])
                last[a.name] = now
        assert worst < resync + n * dt, (n, dt, resync, worst)


def test_split_edges_follow_the_global_queue_in_every_pipe():
    """An edge whose host ports span pipes: each pipe's data plane decides from its own share,
    so the override carries the global queue there whatever the summed count says."""
    params = DclasParams()
    q1 = int(params.thresholds()[0])
    share = q1 * 3 // 4                      # each pipe below Q1; their sum past it
    coord = DclasCoordinator(params)
    coord.set_split_edges(["e0"])
    coord.observe("e0", {5: 2 * share})      # what the poll reads: the pipes' sum
    slots = {(1, 0): 5}
    for rnd in (coord.round, coord.round_incremental):
        res = rnd(0.0, slots, ["e0", "e1"], {(1, 0): frozenset({"e0"})})
        assert res.queues[(1, 0)] == 2
        for pipe_count in (share, share):   # every pipe: the override, else its own count
            local_q = params.queue_of(pipe_count)
            got = res.overrides["e0"].get((1, 0), hw_priority(local_q))
            assert got == hw_priority(2)
        assert res.overrides["e1"] == {}
    # an edge on one pipe keeps the rule before: no override where its count gives the queue
    coord2 = DclasCoordinator(params)
    coord2.observe("e0", {5: 2 * share})
    assert coord2.round(0.0, slots, ["e0"], {(1, 0): frozenset({"e0"})}).overrides["e0"] == {}


def test_edge_pipes_from_the_topology_and_port_map():
    import types
    topo = types.SimpleNamespace(hosts=[
        types.SimpleNamespace(switch="e0", port=1), types.SimpleNamespace(switch="e0", port=2),
        types.SimpleNamespace(switch="e1", port=1), types.SimpleNamespace(switch="e1", port=2)])
    pm = ports.PortMap({"e0": {1: 4, 2: 132}, "e1": {1: 260, 2: 300}})
    assert ports.edge_pipes(topo, pm) == {"e0": frozenset({0, 1}), "e1": frozenset({2})}
    assert ports.edge_pipes(topo) == {"e0": frozenset({0}), "e1": frozenset({0})}


def test_report_steps_count_every_pipe_as_a_domain():
    p = DclasParams()
    one = DigestRounds(FMT, p, ["e0", "e1"], 6, 16, 1.0, 32)
    four = DigestRounds(FMT, p, ["e0", "e1"], 6, 16, 1.0, 32, domains=4)
    assert np.all(np.array(four.steps_of.steps) * 2 == np.array(one.steps_of.steps))


def test_the_controller_marks_split_edges_from_its_topology_and_port_map():
    import types
    from coflow.ctl.round_counters import CounterReads
    topo = types.SimpleNamespace(hosts=[
        types.SimpleNamespace(switch="e0", port=1), types.SimpleNamespace(switch="e0", port=2),
        types.SimpleNamespace(switch="e1", port=1)])
    pm = ports.PortMap({"e0": {1: 4, 2: 132}})
    for target, split in (("tofino", {"e0"}), ("bmv2", set())):
        ctl = types.SimpleNamespace(target=types.SimpleNamespace(name=target), topo=topo,
                                    port_map=pm, coord=DclasCoordinator(DclasParams()))
        CounterReads._edge_pipes(ctl)
        assert ctl.coord.split_edges == split
