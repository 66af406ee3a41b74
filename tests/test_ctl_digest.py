"""Report digests (issue 29): decoding and acking DigestLists, malformed input, missed lists,
and D-CLAS demotions from pushed crossings equal to those from polling over random histories.

The data plane here is a model of p4src report.p4 (``EdgeModel``: a byte counter per slot, a
digest from the packet whose bytes cross a multiple of the slot's step); the PTF test
ptf-tests/test_report.py checks BMv2 against the same rule.
"""
from __future__ import annotations

import logging
import random

import pytest

from coflow.ctl.coord import DclasCoordinator
from coflow.ctl.digest import (DigestError, DigestFormat, DigestInbox, ReportSteps,
                               quantise)
from coflow.dataplane.pb import p4data_pb2, p4runtime_pb2 as pb
from coflow.params import DclasParams

FMT = DigestFormat(digest_id=77, widths=(32, 32, 8, 64), unit_shift=0)


def data(slot, cid, nbytes, widths=(32, 32, 8, 64), raw=None):
    d = p4data_pb2.P4Data()
    vals = [slot, cid[0], cid[1], nbytes]
    for i, (v, w) in enumerate(zip(vals, widths)):
        m = d.struct.members.add()
        m.bitstring = raw[i] if raw and i in raw else v.to_bytes(max(1, (w + 7) // 8), "big")
    return d


def dlist(list_id, entries, digest_id=77):
    m = pb.DigestList()
    m.digest_id = digest_id
    m.list_id = list_id
    for e in entries:
        m.data.add().CopyFrom(e)
    return m


def inbox():
    ib = DigestInbox("e0", FMT)
    ib.owner = {3: (10, 0), 4: (11, 2)}
    ib.take()   # the connection's first poll
    return ib


def test_format_from_the_compiled_p4info():
    import os
    p = os.path.join(os.path.dirname(__file__), "..", "build", "coflow.p4info.txt")
    if not os.path.exists(p):
        pytest.skip("build/coflow.p4info.txt missing: run `make p4`")
    from coflow.dataplane.p4rt import P4InfoHelper
    f = DigestFormat.from_p4info(P4InfoHelper.from_file(p).p4info)
    if f is None:
        pytest.skip("build/ predates the report digest: run `make p4`")
    assert f.widths == (32, 32, 8, 64) and f.unit_shift == 0


def test_decode_ack_merge():
    ib = inbox()
    acks = []
    ib.on_list(dlist(1, [data(3, (10, 0), 5000), data(3, (10, 0), 4096), data(4, (11, 2), 70000)]),
               ack=lambda d, l: acks.append((d, l)))
    assert acks == [(77, 1)]
    got, why = ib.take()
    assert got == {3: 5000, 4: 70000} and why == ""
    assert ib.take() == ({}, "")


def test_tofino_units():
    f = DigestFormat(5, (16, 32, 8, 32), unit_shift=6)
    assert f.decode(data(7, (1, 0), 3, widths=f.widths)) == (7, (1, 0), 192, 0)


@pytest.mark.parametrize("bad, why", [
    ({3: b"\x01" * 9}, "member 3"),          # 9 bytes for a 64-bit count
    ({2: b"\x01\x00"}, "member 2"),          # 16 bits for the 8-bit internal id
    ({0: b""}, "member 0"),                  # empty bitstring
])
def test_malformed_member_dropped_with_one_line(bad, why, caplog):
    ib = inbox()
    ib.on_list(dlist(1, [data(4, (11, 2), 900)]))
    assert ib.take()[0] == {4: 900}
    caplog.set_level(logging.ERROR)
    acks = []
    ib.on_list(dlist(2, [data(3, (10, 0), 1, raw=bad), data(4, (11, 2), 1000)]),
               ack=lambda d, l: acks.append(l))
    got, resync = ib.take()
    assert got == {4: 1000}                  # the good entry kept
    assert resync == "malformed"             # what the bad one carried is unknown: poll
    assert acks == [2] and ib.errors == 1
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(lines) == 1 and why in lines[0] and "\n" not in lines[0]


def test_unknown_slot_and_wrong_shape(caplog):
    ib = inbox()
    caplog.set_level(logging.ERROR)
    d = p4data_pb2.P4Data()
    d.bitstring = b"\x01"
    short = p4data_pb2.P4Data()
    short.struct.members.add().bitstring = b"\x03"
    ib.on_list(dlist(1, [data(9, (10, 0), 100), d, short, data(3, (10, 0), 64)]))
    got, why = ib.take()
    assert got == {3: 64} and why == "malformed" and ib.errors == 3
    msgs = [r.getMessage() for r in caplog.records]
    assert any("unknown slot 9" in m for m in msgs)
    assert any("not a struct" in m for m in msgs) and any("4" in m and "members" in m for m in msgs)
    # a list of another digest: dropped whole, nothing merged
    ib.on_list(dlist(2, [data(3, (10, 0), 99999)], digest_id=5))
    assert ib.take() == ({}, "")


def test_stale_owner_is_not_an_error():
    ib = inbox()
    ib.on_list(dlist(1, [data(3, (99, 1), 100000)]))   # slot 3's previous coflow
    assert ib.take() == ({}, "") and ib.stale == 1 and ib.errors == 0


def test_missed_list_asks_for_a_poll():
    ib = inbox()
    ib.on_list(dlist(1, [data(3, (10, 0), 10)]))
    ib.on_list(dlist(2, [data(3, (10, 0), 20)]))
    assert ib.take() == ({3: 20}, "")
    ib.on_list(dlist(4, [data(3, (10, 0), 40)]))       # list 3 never arrived
    got, why = ib.take()
    assert got == {3: 40} and why == "gap" and ib.missed == 1
    ib.on_list(dlist(5, [data(3, (10, 0), 50)]))
    assert ib.take() == ({3: 50}, "")
    ib.connected()                                      # a new stream: poll first
    assert ib.take()[1] == "connected"
    ib.on_list(dlist(1, []))                            # the new stream's numbering
    assert ib.take() == ({}, "")


def test_steps_powers_of_two_growing():
    p = DclasParams(K=8)
    rs = ReportSteps(p, edges=8)
    steps = [rs.step(q) for q in range(1, 9)]
    assert all(s & (s - 1) == 0 for s in steps)
    assert steps == sorted(steps)
    th = [float(t) for t in p.thresholds()]
    assert 8 * steps[0] * 8 <= th[0] < 8 * steps[0] * 8 * 2
    tn = ReportSteps(p, edges=8, unit_shift=6)
    assert tn.mask(tn.step(1), 32) == ((1 << 32) - 1) & ~((tn.step(1) >> 6) - 1)
    assert ReportSteps(DclasParams(K=8, E=2, Q1=100), 64).step(1) == 1
    assert ReportSteps(DclasParams(K=8, E=2, Q1=100), 64, unit_shift=6).step(1) == 64


# --- digests vs polling over random histories ------------------------------------------------

class EdgeModel:
    """report.p4 on one edge: counts per slot; a digest from the packet that crosses a multiple
    of the slot's step (``(before ^ after) & ~(step - 1) != 0``)."""

    def __init__(self):
        self.count: dict = {}
        self.step: dict = {}      # slot -> step installed
        self.out: list = []       # pending digest entries
        self.list_id = 0

    def packet(self, slot, cid, n):
        before = self.count.get(slot, 0)
        after = before + n
        self.count[slot] = after
        st = self.step.get(slot)
        if st is not None and (before ^ after) & ~(st - 1):
            self.out.append(data(slot, cid, after))

    def flush(self):
        self.list_id += 1
        m = dlist(self.list_id, self.out)
        self.out = []
        return m


def _run(seed):
    from coflow.ctl.digest import DigestRounds
    rng = random.Random(seed)
    params = DclasParams(K=8, E=4, Q1=20_000)
    edges = [f"e{i}" for i in range(4)]
    cids = [(100 + k, 0) for k in range(6)]
    slots = {c: k for k, c in enumerate(cids)}
    fmt = FMT
    dr = DigestRounds(fmt, params, edges, 0, 512, resync_s=2.0, width=64)
    poll_coord, push_coord = DclasCoordinator(params), DclasCoordinator(params)
    models = {e: EdgeModel() for e in edges}

    class Ag:
        def __init__(self, name):
            self.name, self.digests = name, DigestInbox(name, fmt)
    ags = [Ag(e) for e in edges]
    dr.set_owners(ags, slots)
    for a in ags:
        a.digests.take()
    queues: dict = {}
    demotions = []
    t = 0.0
    for rnd in range(60):
        t += 1.0
        # the controller's steps as written at the end of the last round (some rounds quiet:
        # steps grow then, a few slots at a time)
        dr.entities(slots, queues, quiet=rng.random() < 0.5)
        dr.requantise(push_coord)
        for m in models.values():
            m.step = dict(dr.steps)
        for _ in range(rng.randint(0, 25)):
            e, c = rng.choice(edges), rng.choice(cids)
            n = rng.choice([64, 1500, 1500, 9000, rng.randint(1, 60_000)])
            models[e].packet(slots[c], c, n)
        # poll: exact counts, rounded to the steps
        for e in edges:
            counts = {slots[c]: models[e].count.get(slots[c], 0) for c in cids}
            poll_coord.observe(e, dr.quantise(counts))
        # push: the digest lists, through the inboxes
        for a in ags:
            a.digests.on_list(models[a.name].flush())
        pushed, poll = dr.collect(ags, t)
        for e, counts in pushed.items():
            push_coord.observe(e, counts)
        for a in poll:   # the slow resync clock: one edge per round, polled (and rounded)
            push_coord.observe(a.name, dr.quantise(
                {slots[c]: models[a.name].count.get(slots[c], 0) for c in cids}))
        r1 = poll_coord.round(t, slots, edges)
        r2 = push_coord.round(t, slots, edges)
        assert r1.queues == r2.queues and r1.overrides == r2.overrides, f"seed {seed} round {rnd}"
        demotions.append(sum(q > 1 for q in r1.queues.values()))
        queues = r1.queues
    return demotions


@pytest.mark.parametrize("seed", range(12))
def test_digest_demotions_equal_polling(seed):
    d = _run(seed)
    assert d[-1] > 0            # the history did demote coflows (not a vacuous equality)


def test_rounding_error_is_bounded():
    """Each edge's rounded count is at most one step below its count: a coflow's global size at
    most edges x step below, 1/8 of its band."""
    p = DclasParams(K=8)
    rs = ReportSteps(p, edges=8)
    rng = random.Random(3)
    for _ in range(2000):
        q = rng.randint(1, 8)
        st = rs.step(q)
        n = rng.randint(0, 1 << 40)
        assert 0 <= n - quantise(n, st) < st
    th = [float(t) for t in p.thresholds()]
    assert 8 * rs.step(1) <= th[0] / 8
    assert 8 * rs.step(3) <= (th[2] - th[1]) / 8


_HEAD = (("slot", 16), ("external_id", 32), ("internal_id", 8))


def _p4info(members):
    from coflow.dataplane.pb import p4info_pb2
    p = p4info_pb2.P4Info()
    d = p.digests.add()
    d.preamble.id, d.preamble.name = 9, "report_digest_t"
    d.type_spec.struct.name = "report_digest_t"
    st = p.type_info.structs["report_digest_t"]
    for name, w in members:
        m = st.members.add()
        m.name = name
        m.type_spec.bitstring.bit.bitwidth = w
    return p


@pytest.mark.parametrize("members", [
    (("slot", 32), ("external_id", 32), ("bytes", 64)),            # too few
    _HEAD + (("units", 32), ("pipe", 8)),                           # a fifth member, not the port
    _HEAD + (("port", 16), ("units", 32)),                          # the port before the count
    _HEAD + (("units", 32), ("port", 16), ("port", 16)),            # six
])
def test_p4info_digest_of_another_shape_is_one_error(members):
    from coflow.dataplane.pb import p4info_pb2
    assert DigestFormat.from_p4info(p4info_pb2.P4Info()) is None    # no digest: poll only
    with pytest.raises(DigestError, match="members") as e:
        DigestFormat.from_p4info(_p4info(members))
    assert "\n" not in str(e.value)


def test_p4info_digest_with_the_port_member():
    f = DigestFormat.from_p4info(_p4info(_HEAD + (("units", 32), ("port", 16))), unit_shift=6)
    assert f.widths == (16, 32, 8, 32, 16) and f.unit_shift == 6
