"""Tofino target profile (coflow.tofino.target, coflow.tofino.crc, coflow.tofino.tm) and the
translation told the target: pure functions, no compiler needed."""
from __future__ import annotations

import zlib

import pytest

from coflow.dataplane import constants as C
from coflow.dataplane.constants import CoflowId
from coflow.dataplane.packet import hash_slot as v1model_hash_slot
from coflow.params import DclasParams, hw_priority
from coflow.tofino import crc, tm
from coflow.tofino.target import BMV2, TOFINO, get_target, tofino_slot_crc, tofino_tag
from coflow.ctl import model as M
from coflow.ctl import translate as TR


def test_crc_matches_the_reference_check_values():
    # the Rocksoft check values of "123456789"
    assert crc.crc(b"123456789", 0x04C11DB7) == 0xCBF43926                      # CRC-32
    assert crc.crc(b"123456789", 0x1EDC6F41) == 0xE3069283                      # CRC-32C
    assert crc.crc(b"123456789", 0x04C11DB7, reflected=False) == 0xFC891918     # CRC-32/BZIP2
    assert crc.crc(b"123456789", 0x8005, 16, True, 0, 0) == 0xBB3D              # CRC-16/ARC


def test_field_list_bytes_are_msb_first():
    assert crc.field_bytes((0x01020304, 32), (0x05, 8)) == bytes([1, 2, 3, 4, 5])
    with pytest.raises(ValueError):
        crc.field_bytes((1, 3))
    with pytest.raises(ValueError):
        crc.field_bytes((256, 8))


@pytest.mark.parametrize("ext,internal", [(0, 0), (1, 0), (7, 3), (123456, 255), (C.MAX_EXTERNAL, 0)])
def test_tofino_slot_hash_is_zlib_crc32_of_the_field_list(ext, internal):
    """The switch's slot: HASH_SLOT_BASE + low 15 bits of CRC-32 over {external, internal}."""
    data = ext.to_bytes(4, "big") + bytes([internal])
    assert tofino_slot_crc(ext, internal) == zlib.crc32(data)
    slot = TOFINO.hash_slot(CoflowId(ext, internal))
    assert slot == C.TNA_HASH_SLOT_BASE + (zlib.crc32(data) & (C.TNA_HASH_SLOTS - 1))
    assert TOFINO.hash_slot((ext, internal)) == slot
    assert C.TNA_HASH_SLOT_BASE <= slot < C.TNA_COFLOW_SLOTS


def test_bmv2_slot_hash_is_the_v1model_one():
    for cid in (CoflowId(1, 0), CoflowId(99, 7), CoflowId(C.MAX_EXTERNAL, C.MAX_INTERNAL)):
        assert BMV2.hash_slot(cid) == v1model_hash_slot(cid)


def test_tofino_slot_hash_spreads_grids_of_consecutive_ids():
    """CRC-32 is linear over GF(2): on a grid of consecutive ids (12 varying bits inside a
    32-bit window) its low 15 bits are injective here, so a job's stages never collide."""
    slots = {TOFINO.hash_slot((e, i)) for e in range(1000) for i in range(4)}
    assert len(slots) == 4000
    # random-looking ids: close to the birthday bound of 32768 slots
    import random
    rng = random.Random(1)
    ids = {(rng.randrange(1 << 32), rng.randrange(256)) for _ in range(4000)}
    used = {TOFINO.hash_slot(c) for c in ids}
    assert len(used) > 0.9 * len(ids)


def test_tag_is_nonzero_and_differs_from_the_slot_hash():
    tags = {tofino_tag(e, 0) for e in range(2000)}
    assert all(t >> 31 == 1 for t in tags) and len(tags) == 2000
    assert tofino_tag(5, 1) & 0x7FFFFFFF == crc.crc(bytes([0, 0, 0, 5, 1]), C.TNA_TAG_CRC_POLY) & 0x7FFFFFFF


def test_target_sizes_come_from_the_shared_constants():
    assert TOFINO.coflow_slots == C.TNA_COFLOW_SLOTS >= 1 << 16
    assert TOFINO.assigned_slots == C.TNA_ASSIGNED_SLOTS
    assert TOFINO.dclas_quantum == 256 * 1024
    assert TOFINO.dclas_key_max == (1 << 20) - 1
    assert BMV2.coflow_slots == C.COFLOW_SLOTS and BMV2.dclas_quantum == 1
    assert get_target("tofino") is TOFINO and get_target(BMV2) is BMV2
    with pytest.raises(ValueError):
        get_target("tofino2")


def test_dclas_ranges_are_quantised_to_the_nearest_step():
    p = DclasParams(K=8)
    assert BMV2.dclas_ranges(p.ranges()) == p.ranges()
    rs = TOFINO.dclas_ranges(p.ranges())
    q = TOFINO.dclas_quantum
    # contiguous from 0 to the key's max, every threshold within half a step of the paper's
    assert rs[0][0] == 0 and rs[-1][1] == TOFINO.dclas_key_max
    for (_, hi, _), (lo2, _, _) in zip(rs, rs[1:]):
        assert lo2 == hi + 1
    for (_, hi, qi), thr in zip(rs[:-1], p.thresholds()):   # the last one ends at the key's max
        assert abs((hi + 1) * q - thr) <= q / 2, (qi, thr)
    # 10 MiB x 10^5 = 1 PB is past the 256 GiB key: queues 7 and 8 are unreachable locally
    assert [r[2] for r in rs] == [1, 2, 3, 4, 5, 6]


def test_dclas_entities_for_tofino():
    ents = TR.dclas_entities(DclasParams(K=8), "tofino")
    assert [e.match for e in ents][0] == (("bytes", (0, 39)),)     # 10 MiB = 40 x 256 KiB
    assert [dict(e.params)["prio"] for e in ents] == [hw_priority(q) for q in range(1, 7)]
    assert TR.dclas_entities(DclasParams(K=8)) == TR.dclas_entities(DclasParams(K=8), "bmv2")


def test_heavy_threshold_in_units():
    assert BMV2.heavy_param(10 << 20) == 10 << 20
    assert TOFINO.heavy_param(10 << 20) == (10 << 20) // 64
    assert TOFINO.heavy_param(TR.NO_HEAVY) == C.TNA_UNITS_MAX
    cfg = TR.config_entity("fifo-lm", 4, 1000, 7, "tofino")
    assert dict(cfg.params)["heavy_bytes"] == 1000 // 64
    assert TR.config_entity("dclas") == TR.config_entity("dclas", target="bmv2")


def test_static_state_and_slots_and_meters_for_tofino():
    from coflow import topology as topo
    t = topo.leafspine(2, 2, 2)
    st = TR.static_state(t, topo.routes(t), "dclas", DclasParams(K=8), target="tofino")
    for ents in st.values():
        d = [e for e in ents if getattr(e, "table", None) == M.T_DCLAS]
        assert len(d) == 6
    slots = TR.SlotTable(TOFINO.assigned_slots)
    assert slots.assign((1, 0)) == 0 and slots.size == C.TNA_ASSIGNED_SLOTS
    # meters come from a pool of the target's size per edge, whatever the coflow's slot
    ctx = TR.MeterContext(t, TOFINO.metered_slots)
    assert ctx.pool.size == C.TNA_FLOW_METERS
    last = len(t.hosts) - 1
    out = TR.meter_entities_arrays(ctx, [(1, 0), (2, 0)], [0, 1], [0, 0], [last, last], [1e5, 1e5],
                                   {(1, 0): 3, (2, 0): C.TNA_METERED_SLOTS}, TR.CtlSettings())
    metered = {(dict(e.match).get("external_id"), dict(e.params)["index"])
               for ents in out.values() for e in ents.values()
               if getattr(e, "table", None) == M.T_FLOW_METER}
    assert metered == {(1, 0), (2, 1)}


def test_tm_plan_strict_and_weighted():
    s = tm.queue_plan(tm.STRICT)
    assert s.strict_qids() == [7, 6, 5, 4, 3, 2, 1, 0]
    w = tm.queue_plan(tm.WEIGHTED, DclasParams(K=8).queue_weights())
    assert w.strict_qids() == [] and {q.remaining_bw_priority for q in w.queues} == {0}
    ws = {q.qid: q.dwrr_weight for q in w.queues}
    assert ws[7] == tm.DWRR_WEIGHT_MAX and ws[0] == round(tm.DWRR_WEIGHT_MAX / 8)
    calls = tm.bf_tm_calls(s, dev_port=4)
    assert calls[0][0] == "bf_tm_port_q_mapping_set"
    assert ("bf_tm_sched_q_remaining_bw_priority_set", 0, 4, 7, 7) in calls
    with pytest.raises(ValueError):
        tm.queue_plan("fifo")


def test_ctl_run_target_tofino_argument_errors(tmp_path, capsys):
    """``coflow ctl run --target tofino``: the P4Info and device config come from the Tofino
    build; a missing build is one error line, before any switch is contacted."""
    import os
    from coflow.cli import main
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    topo = os.path.join(repo, "topologies", "bigswitch-16.json")
    assert main(["ctl", "run", "--topo", topo, "--mode", "dclas", "--target", "tofino",
                 "--tofino-build", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --tofino-build") and "make p4-tofino" in err[0]
    (tmp_path / "pipe").mkdir()
    (tmp_path / "pipe" / "tofino.bin").write_bytes(b"BIN")
    (tmp_path / "pipe" / "context.json").write_bytes(b"{}")
    assert main(["ctl", "run", "--topo", topo, "--mode", "dclas", "--target", "tofino",
                 "--tofino-server", "stratum", "--tofino-build", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --p4info") and "coflow_tna.p4info.txt" in err[0]
    assert (tmp_path / "device_config.stratum.bin").is_file()
