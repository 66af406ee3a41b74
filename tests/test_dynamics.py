"""Runtime dynamics (coflow.dynamics): multi-wave coflows, restarted tasks, DAGs of coflows with
Starts-After (barrier) and Finishes-Before (pipelined) edges, in the trace format, the simulator
(JCT beside CCT) and the generators.  Hand-checked examples, properties for every scheduler,
malformed traces."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from coflow import trace as T
from coflow.cli import main
from coflow.dynamics import TABLE4_MIXES, build_dynamics, split_waves, tpcds_dags, wave_mix
from coflow.params import MB
from coflow.sched import NAMES, make_scheduler
from coflow.sched.flowlevel import Fair
from coflow.sim import coflow_records, isolation_times, job_records, simulate

# every size in MB, every port at 1 MB/s: 1 MB takes 1 s alone
CAP = float(MB)


def run(text, name="fair", settings_=None, **kw):
    wl = T.expand(T.parse_trace(text))
    res = simulate(wl, make_scheduler(name, settings_), CAP, check=True, **kw)
    recs = coflow_records(wl, res, CAP)
    return wl, res, {r["id"]: r for r in recs}, job_records(wl, res, CAP, recs)


# Trace format ---------------------------------------------------------------------------------

DYN = """4 5
1 0 2 0 1 2 2:2.0 3:1.0
1 0 1 1 1 2:1.0 wave=2
1 0 1 1 1 2:0.5 wave=3 restart=1
2 0 1 0 1 3:1.0 after=1
3 1.5 1 1 1 0:1.0 after=1 pipe=2
"""


def test_round_trip_and_plain_files_unchanged():
    tr = T.parse_trace(DYN)
    assert [(c.id, c.wave, c.restart, c.after, c.pipe) for c in tr.coflows] == [
        (1, 1, False, (), ()), (1, 2, False, (), ()), (1, 3, True, (), ()), (2, 1, False, (1,), ()),
        (3, 1, False, (1,), (2,))]
    assert T.format_trace(tr) == DYN
    assert T.parse_trace(T.format_trace(tr)).coflows == tr.coflows
    plain = "4 2\n1 0 1 0 1 1:1.0\n2 3 1 0 1 1:2.5\n"
    ptr = T.parse_trace(plain)
    assert not ptr.dynamic and T.format_trace(ptr) == plain
    assert T.expand(ptr).dynamics is None


def test_coflow_ids_follow_the_registry_rule():
    """Aalo's Pseudocode 2 as the API applies it: a new DAG gets next.0, a child parent.(1 + max
    sibling); a second root of the same DAG joins its job (registry's ``external=``)."""
    text = ("5 6\n1 0 1 0 1 1:1\n2 0 1 0 1 1:1\n3 0 1 0 1 1:1 after=1\n4 0 1 0 1 1:1 pipe=1\n"
            "5 0 1 0 1 1:1 after=3,2\n6 0 1 0 1 1:1\n")
    dyn = build_dynamics(T.parse_trace(text).coflows)
    got = {int(i): str(c) for i, c in zip(dyn.ids, dyn.cid)}
    # registration order (parents first, file order on ties): 1, 2, 3, 4, 6, 5
    assert got == {1: "1.0", 2: "1.1", 3: "1.2", 4: "1.3", 5: "1.4", 6: "2.0"}
    from coflow.api.registry import CoflowRegistry
    reg = CoflowRegistry(["h0", "h1"])
    a = reg.register([("h0", "h1", None)])
    b = reg.register([("h0", "h1", None)], external=a.cid.external)
    c = reg.register([("h0", "h1", None)], parent=str(a.cid))
    d = reg.register([("h0", "h1", None)], parent=str(a.cid))
    e = reg.register([("h0", "h1", None)], parent=str(c.cid))
    f = reg.register([("h0", "h1", None)])
    assert [str(x.cid) for x in (a, b, c, d, e, f)] == ["1.0", "1.1", "1.2", "1.3", "1.4", "2.0"]


BAD = [
    # (text, line, field)
    ("4 2\n1 0 1 0 1 1:1\n1 0 1 0 1 1:1 wave=3\n", 3, "wave"),                 # gap: no wave 2
    ("4 1\n1 0 1 0 1 1:1 wave=2\n", 2, "wave"),                                # no wave 1
    ("4 3\n1 0 1 0 1 1:1\n1 0 1 0 1 1:1 wave=2\n1 0 1 0 1 1:1 wave=2\n", 4, "wave"),  # wave twice
    ("4 2\n1 0 1 0 1 1:1\n1 0 1 0 1 1:1\n", 3, "id"),                           # duplicate coflow
    ("4 1\n1 0 1 0 1 1:1 wave=0\n", 2, "wave"),
    ("4 1\n1 0 1 0 1 1:1 wave=x\n", 2, "wave"),
    ("4 2\n1 0 1 0 1 1:1\n2 0 1 0 1 1:1 after=9\n", 3, "after"),                # unknown parent
    ("4 2\n1 0 1 0 1 1:1\n2 0 1 0 1 1:1 pipe=7\n", 3, "pipe"),
    ("4 1\n1 0 1 0 1 1:1 after=1\n", 2, "after"),                               # own parent
    ("4 3\n1 0 1 0 1 1:1 after=3\n2 0 1 0 1 1:1 after=1\n3 0 1 0 1 1:1 pipe=2\n", 2, "after"),  # cycle
    ("4 2\n1 0 1 0 1 1:1 pipe=2\n2 0 1 0 1 1:1 pipe=1\n", 2, "pipe"),           # 2-cycle
    ("4 2\n1 0 1 0 1 1:1\n2 0 1 0 1 1:1 after=1 pipe=1\n", 3, "pipe"),          # both kinds
    ("4 2\n1 0 1 0 1 1:1\n2 0 1 0 1 1:1 after=1,1\n", 3, "after"),              # listed twice
    ("4 2\n1 0 1 0 1 1:1\n2 0 1 0 1 1:1 after=\n", 3, "after"),
    ("4 2\n1 0 1 0 1 1:1\n2 0 1 0 1 1:1 after=a\n", 3, "after"),
    ("4 3\n1 0 1 0 1 1:1\n2 0 1 0 1 1:1\n2 0 1 0 1 1:1 wave=2 after=1\n", 4, "after"),  # edge on a wave
    ("4 1\n1 0 1 0 1 1:1 restart=1\n", 2, "restart"),                           # restart of wave 1
    ("4 2\n1 0 1 0 1 1:1\n1 0 1 0 1 1:1 wave=2 restart=2\n", 3, "restart"),
    ("4 1\n1 0 1 0 1 1:1 colour=red\n", 2, "colour"),                           # unknown annotation
    ("4 1\n1 0 1 0 1 1:1 wave=2 wave=2\n", 2, "wave"),
    ("4 2\n1 0 1 0 1 1:1\n2 0 1 0 1 1:1 2:1\n", 3, "line"),                     # plain extra field
]


@pytest.mark.parametrize("text,line,field", BAD)
def test_malformed_dynamics_one_line_error(text, line, field, tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(T.TraceError) as ei:
        T.read_trace(str(p))
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith(f"{p}:{line}: {field}: "), msg


def test_cycle_message_names_the_cycle(tmp_path):
    with pytest.raises(T.TraceError, match=r"cycle of dependencies 1 -> 3 -> 2 -> 1"):
        T.parse_trace(BAD[9][0])


@pytest.mark.parametrize("text,line,field", [BAD[0], BAD[6], BAD[9]])
@pytest.mark.parametrize("cmd", ["check", "waves", "sim"])
def test_cli_exit_2_nothing_written(text, line, field, cmd, tmp_path, capsys):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    out = tmp_path / "out.json"
    argv = {"check": ["trace", "check", str(p)],
            "waves": ["trace", "waves", str(p), "--max-waves", "2", "-o", str(out)],
            "sim": ["sim", "--trace", str(p), "--scheduler", "fair", "--quiet", "--json", str(out)]}[cmd]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{p}:{line}: {field}: " in err, err
    assert not out.exists()


# Hand-checked examples --------------------------------------------------------------------------

TWO_WAVE = """3 3
1 0 1 0 1 2:2
1 0 1 1 1 2:1 wave=2
2 0 1 1 1 2:2
"""
# Coflow 1 in two waves: wave 1 = port 0 -> 2, 2 MB; wave 2 = port 1 -> 2, 1 MB, released when
# wave 1 is done.  Coflow 2 = port 1 -> 2, 2 MB, at 0.  All meet at downlink 2 (1 MB/s).
#
# fair (per-flow max-min): [0, 4) wave 1 and coflow 2 share downlink 2 at 0.5 MB/s: both finish
# at 4; wave 2 then runs alone, 4 -> 5.  CCT 1 = 5, CCT 2 = 4.  (Were wave 2 there at 0, three
# flows would share: coflow 2 would end at 5.)
#
# sebf (without starvation freedom's T/δ): at 0 it sees wave 1 only (2 MB, Γ = 2) and coflow 2 (Γ = 2): a tie, broken by arrival
# then id: coflow 1 first.  Wave 1 alone 0 -> 2; at 2 wave 2 appears (Γ = 1 < 2): 2 -> 3; coflow 2
# 3 -> 5.  CCT 1 = 3, CCT 2 = 5.  (Had SEBF seen all 3 MB at 0, Γ = 3 > 2: coflow 2 first, CCT
# 2 = 2.)  Each coflow is its own job: JCT = CCT.
TWO_WAVE_EXPECTED = {"fair": {1: 5.0, 2: 4.0}, "sebf": {1: 3.0, 2: 5.0}}


@pytest.mark.parametrize("name", sorted(TWO_WAVE_EXPECTED))
def test_two_wave_coflow_by_hand(name):
    wl, res, recs, jobs = run(TWO_WAVE, name, {"starvation": "false"} if name == "sebf" else None)
    want = TWO_WAVE_EXPECTED[name]
    assert {i: round(r["cct_s"], 9) for i, r in recs.items()} == want
    assert recs[1]["waves"] == 2 and recs[1]["bytes"] == 3 * MB and recs[1]["isolation_s"] == pytest.approx(3.0)
    assert {j["job"]: round(j["jct_s"], 9) for j in jobs} == want
    assert res.released[1] == pytest.approx(res.finish[0])   # wave 2 starts when wave 1 ends


def test_wave_keeps_coflow_id_and_bytes_sent():
    """A wave is the same coflow to the scheduler: the same id and arrival, bytes sent carried
    over; clairvoyant schedulers see only the released wave's sizes."""
    seen = []

    class Spy(Fair):
        clairvoyant = True

        def allocate(self, v):
            seen.append((v.now, v.cf_id.tolist(), v.cf_arrival.tolist(), v.cf_sent.tolist(), v.cf_total.tolist()))
            return super().allocate(v)

    wl = T.expand(T.parse_trace(TWO_WAVE))
    simulate(wl, Spy(), CAP)
    at4 = [s for s in seen if s[0] == pytest.approx(4.0)][0]
    assert at4[1] == [1] and at4[2] == [0.0]
    assert at4[3] == [pytest.approx(2 * MB)] and at4[4] == [pytest.approx(1 * MB)]
    assert all(tot[0] == pytest.approx(2 * MB) for t, _, _, _, tot in seen if t < 4 - 1e-9)


DAG3 = """4 3
1 0 1 0 1 3:2
2 0 1 1 1 3:1 after=1
3 0 1 2 1 3:0.5 pipe=2
"""
# Three coflows, one job: 1 -> 2 Starts-After (barrier), 2 -> 3 Finishes-Before (pipelined); all
# into downlink 3 (1 MB/s).
#   coflow 1 (2 MB) runs alone 0 -> 2 (CCT 2).
#   at 2 coflow 2 starts (its barrier parent is complete) and coflow 3 with it (its pipelined
#   parent has started).  fair: 0.5 MB/s each; coflow 3's 0.5 MB are through at 3, coflow 2's
#   1 MB at 3.5 (0.5 MB by 3, then 1 MB/s).  sebf: coflow 3 first (Γ 0.5 < 1): 2 -> 2.5, coflow 2
#   2.5 -> 3.5.  Either way coflow 2 completes at 3.5 (CCT 1.5) and coflow 3 may not finish
#   before it: complete at 3.5, CCT 1.5 (not 1.0 or 0.5).  JCT = 3.5 - 0 = 3.5.
#   dclas (Q1 above every size: one queue, FIFO): coflows 2 and 3 arrive together; Aalo's tie
#   break by CoflowId (1.1 before 1.2) serves coflow 2 first: 2 -> 3 (CCT 1.0), coflow 3 3 -> 3.5.
#   Critical path of isolation times: 2 (coflow 1) + 1 (coflow 2) = 3 <= 3.5.
DAG3_CCT = {"fair": {1: 2.0, 2: 1.5, 3: 1.5}, "sebf": {1: 2.0, 2: 1.5, 3: 1.5}, "dclas": {1: 2.0, 2: 1.0, 3: 1.5}}


@pytest.mark.parametrize("name", sorted(DAG3_CCT))
def test_three_coflow_dag_by_hand(name):
    wl, res, recs, jobs = run(DAG3, name, {"Q1": "1e12"} if name == "dclas" else
                              {"starvation": "false"} if name == "sebf" else None)
    assert {i: round(r["cct_s"], 9) for i, r in recs.items()} == DAG3_CCT[name]
    assert [r["coflow_id"] for r in recs.values()] == ["1.0", "1.1", "1.2"]
    (job,) = jobs
    assert job["ids"] == [1, 2, 3] and job["jct_s"] == pytest.approx(3.5)
    assert job["critical_path_s"] == pytest.approx(3.0) and job["levels"] == 3
    assert res.released[1] == pytest.approx(2.0) and res.released[2] == pytest.approx(2.0)


def test_report_has_jct_beside_cct(tmp_path):
    p = tmp_path / "dag.txt"
    p.write_text(DAG3)
    out = tmp_path / "r.json"
    assert main(["sim", "--trace", str(p), "--scheduler", "fair", "--quiet", "--json", str(out),
                 "--link-gbps", str(8 * MB / 1e9)]) == 0
    import json
    rep = json.loads(out.read_text())
    for k in ("avg_cct_s", "p95_cct_s", "per_bin", "avg_jct_s", "p95_jct_s", "jobs"):
        assert k in rep["summary"]
    assert rep["summary"]["avg_jct_s"] == pytest.approx(3.5) and rep["summary"]["jobs"] == 1
    assert rep["summary"]["avg_cct_s"] == pytest.approx(5 / 3)


def test_plain_trace_jobs_are_coflows():
    wl, res, recs, jobs = run("3 2\n1 0 1 0 1 2:2\n2 0 1 1 1 2:2\n")
    assert [j["jct_s"] for j in jobs] == [recs[1]["cct_s"], recs[2]["cct_s"]]


def test_waves_wait_for_their_arrival_and_zero_byte_waves():
    # wave 2 may not start before 10 s; an empty wave 3 completes on release
    wl, res, recs, jobs = run("3 3\n1 0 1 0 1 2:1\n1 10000 1 1 1 2:1 wave=2\n1 10000 1 1 1 2:0 wave=3\n")
    assert res.released[1] == pytest.approx(10.0) and recs[1]["cct_s"] == pytest.approx(11.0)


# Properties, every scheduler ---------------------------------------------------------------------

@st.composite
def dynamic_traces(draw, max_ports=4, max_coflows=4, max_waves=3):
    P = draw(st.integers(2, max_ports))
    N = draw(st.integers(1, max_coflows))
    lines, t = [], 0
    for c in range(1, N + 1):
        t += draw(st.sampled_from([0, 0, 300, 1000]))
        ann = []
        if c > 1:
            parents = draw(st.lists(st.integers(1, c - 1), max_size=2, unique=True))
            kinds = [draw(st.booleans()) for _ in parents]
            a = [str(p) for p, k in zip(parents, kinds) if k]
            b = [str(p) for p, k in zip(parents, kinds) if not k]
            ann += [f"after={','.join(a)}"] if a else []
            ann += [f"pipe={','.join(b)}"] if b else []
        for w in range(1, draw(st.integers(1, max_waves)) + 1):
            m = draw(st.lists(st.integers(0, P - 1), min_size=1, max_size=2, unique=True))
            r = draw(st.lists(st.integers(0, P - 1), min_size=1, max_size=2, unique=True))
            red = " ".join(f"{p}:{draw(st.sampled_from([0.5, 1, 2, 4]))}" for p in r)
            extra = ann if w == 1 else [f"wave={w}"] + (["restart=1"] if draw(st.booleans()) else [])
            lines.append(f"{c} {t + draw(st.sampled_from([0, 0, 500])) * (w > 1)} {len(m)} "
                         f"{' '.join(map(str, m))} {len(r)} {red} {' '.join(extra)}".rstrip())
    text = f"{P} {len(lines)}\n" + "\n".join(lines) + "\n"
    caps = draw(st.lists(st.sampled_from([1.0, 2.0, 0.5]), min_size=2 * P, max_size=2 * P))
    return text, np.array(caps) * MB


def _settings(name):
    return {"Q1": str(2 * MB), "delta": "0.1"} if "dclas" in name or name == "fai" else None


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=dynamic_traces())
def test_dynamics_properties(name, inst):
    """Capacity never exceeded; every byte delivered; no wave or child starts before its
    predecessor allows; a pipelined child is not complete before its parents; JCT >= the
    DAG's critical path of isolation times."""
    text, caps = inst
    tr = T.parse_trace(text, allow_unsorted=True)
    wl = T.expand(tr)
    if wl.dynamics is None:   # drawn without waves or edges: through the release machinery anyway
        wl.dynamics = build_dynamics(tr.coflows)
    P = wl.ports
    r = simulate(wl, make_scheduler(name, _settings(name)), caps, check=True)
    assert r.max_overload <= 1e-6, "a link was loaded above its capacity"
    dyn = wl.dynamics
    eps = 1e-6
    if r.admitted.all():
        assert np.all(np.isfinite(r.finish)) and np.all(np.isfinite(r.complete)), "bytes not delivered"
    iso = isolation_times(wl, caps[:P], caps[P:])
    for u in range(wl.ncoflows):
        if not np.isfinite(r.finish[u]):
            continue
        assert r.released[u] >= wl.arrival[u] - eps
        assert r.finish[u] - r.released[u] >= iso[u] * (1 - 1e-6) - 1e-9, "a wave beat its isolation time"
        p = dyn.prev_unit[u]
        if p >= 0:
            assert r.released[u] >= r.finish[p] - eps, "a wave started before the previous wave finished"
    for c in range(dyn.ncoflows):
        s = r.released[dyn.first_unit[c]]
        if not np.isfinite(s):
            continue
        for p in dyn.after[c]:
            assert s >= r.complete[p] - eps, "a Starts-After child started before its parent completed"
        for p in dyn.pipe[c]:
            assert s >= r.start[p] - eps, "a Finishes-Before child started before its parent"
            if np.isfinite(r.complete[c]):
                assert r.complete[c] >= r.complete[p] - eps, "a Finishes-Before child completed first"
    recs = coflow_records(wl, r, caps)
    for j in job_records(wl, r, caps, recs):
        if j["jct_s"] is not None:
            assert j["jct_s"] >= j["critical_path_s"] * (1 - 1e-6) - 1e-9, "JCT below the critical path"
    for rec in recs:
        if rec["cct_s"] is not None:
            assert rec["cct_s"] >= -eps


@pytest.mark.parametrize("name", ["fair", "sebf", "dclas", "pfp"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=dynamic_traces(), reschedule=st.sampled_from(["flow", "coflow"]))
def test_dynamic_path_on_a_plain_trace_equals_the_plain_path(name, inst, reschedule):
    """The release machinery on a trace without waves or edges changes nothing."""
    text, caps = inst
    tr = T.parse_trace(text, allow_unsorted=True)
    plain = T.Trace(tr.ports, [T.CoflowSpec(c.id, c.arrival_ms, c.mappers, c.reducers)
                               for c in tr.coflows if c.wave == 1], tr.path)
    a = simulate(T.expand(plain), make_scheduler(name, _settings(name)), caps, reschedule=reschedule)
    wl = T.expand(plain)
    wl.dynamics = build_dynamics(plain.coflows)
    b = simulate(wl, make_scheduler(name, _settings(name)), caps, reschedule=reschedule)
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-9, atol=1e-9)


# Generators ---------------------------------------------------------------------------------------

BUNDLED = os.path.join(os.path.dirname(__file__), "..", "traces", "fb-like-120x16.txt")


@pytest.mark.parametrize("k", sorted(TABLE4_MIXES))
def test_split_waves_table4_mix_exact_and_flows_preserved(k):
    tr = T.read_trace(BUNDLED)
    w = split_waves(tr, mix=TABLE4_MIXES[k])
    C = len(tr.coflows)
    want = [round(f * C) / C for f in TABLE4_MIXES[k]]
    assert wave_mix(w) == pytest.approx(want, abs=1 / C)
    w2 = T.parse_trace(T.format_trace(w))       # written and read back: valid
    a, b = T.expand(tr), T.expand(w2)
    key = lambda wl: sorted(zip(wl.ids[wl.coflow_of_flow()].tolist(), wl.src.tolist(), wl.dst.tolist(),
                                np.round(wl.size / MB, 4).tolist()))
    assert key(a) == key(b)                     # the same flows, only released in waves
    for c in w.coflows:
        assert c.arrival_ms == next(x.arrival_ms for x in tr.coflows if x.id == c.id)


def test_split_waves_max_waves_cap():
    tr = T.read_trace(BUNDLED)
    w = split_waves(tr, max_waves=2)
    mix = wave_mix(w)
    assert len(mix) == 2 and 0 < mix[1] < 1
    S = -(-max(len(c.mappers) for c in tr.coflows) // 2)
    assert all(len(c.mappers) <= S for c in w.coflows)
    with pytest.raises(ValueError):
        split_waves(w, max_waves=2)


def test_tpcds_dags_seeded_valid_and_multilevel():
    a, b = tpcds_dags(20, 16, seed=3), tpcds_dags(20, 16, seed=3)
    assert T.format_trace(a) == T.format_trace(b)
    assert T.format_trace(a) != T.format_trace(tpcds_dags(20, 16, seed=4))
    tr = T.parse_trace(T.format_trace(a))
    dyn = build_dynamics(tr.coflows)
    assert len(set(dyn.job.tolist())) == 20
    # every query: J joins -> levels F/D, J1..J, A: at least 3 levels
    depth = {}
    for c in dyn.order.tolist():
        depth[c] = 1 + max((depth[p] for p in dyn.after[c] + dyn.pipe[c]), default=0)
    for j in set(dyn.job.tolist()):
        assert max(depth[c] for c in range(dyn.ncoflows) if dyn.job[c] == j) >= 3
    assert any(dyn.after) and any(dyn.pipe)
    assert not any(build_dynamics(tpcds_dags(5, 8, seed=1, barrier_fraction=1.0).coflows).pipe)
    assert not any(build_dynamics(tpcds_dags(5, 8, seed=1, barrier_fraction=0.0).coflows).after)


def test_cli_generators(tmp_path, capsys):
    out = tmp_path / "w.txt"
    assert main(["trace", "waves", BUNDLED, "--table4", "4", "-o", str(out)]) == 0
    assert "4: 5.8%" in capsys.readouterr().out
    assert T.read_trace(str(out)).dynamic
    d = tmp_path / "d.txt"
    assert main(["trace", "dag", "--queries", "4", "--ports", "8", "-o", str(d)]) == 0
    rep = tmp_path / "r.json"
    assert main(["sim", "--trace", str(d), "--scheduler", "dclas", "--quiet", "--json", str(rep)]) == 0
    import json
    s = json.loads(rep.read_text())["summary"]
    assert s["jobs"] == 4 and s["jobs_completed"] == 4 and s["avg_jct_s"] >= s["avg_cct_s"]
    cmp = tmp_path / "c.json"
    assert main(["compare", "--trace", str(d), "--schedulers", "fair,sebf", "--quiet", "--json", str(cmp)]) == 0
    rows = json.loads(cmp.read_text())["table"]["rows"]
    assert rows["fair"]["jct_avg"] == 1.0
    assert rows["sebf"]["jct_avg"] == pytest.approx(rows["fair"]["avg_jct_s"] / rows["sebf"]["avg_jct_s"])
    assert main(["trace", "waves", BUNDLED, "-o", str(tmp_path / "x.txt")]) == 2


def test_first_cuts_whole_jobs(tmp_path):
    tr = T.parse_trace(DAG3 + "")
    assert [c.id for c in T.closed_prefix(tr.coflows, 2)] == [1, 2]
    tr = T.parse_trace("4 3\n1 0 1 0 1 3:2\n2 0 1 1 1 3:1 after=3\n3 0 1 2 1 3:0.5\n")
    assert [c.id for c in T.closed_prefix(tr.coflows, 2)] == [1]


# The emulation's driver, without a fabric: fake agents, the real registry ----------------------

class FakeAgents:
    """Agents that 'deliver' a flow after bytes / rate, one flow at a time per receiver."""

    def __init__(self, rate_Bps=2e6):
        import queue
        self.events = queue.Queue()
        self.ips = {f"h{i}": f"10.0.0.{i}" for i in range(16)}
        self.port, self.errors, self.rate = 5001, [], rate_Bps
        self.busy: dict = {}
        self.sends = []
        self.timers = []

    def send(self, host, cmd):
        import threading
        import time
        now = time.time()
        self.sends.append((now, host, cmd))
        t = max(now, self.busy.get(cmd["dst"], 0.0)) + cmd["bytes"] / self.rate
        self.busy[cmd["dst"]] = t
        ev = {"run": cmd["run"], "coflow": cmd["coflow"], "flow": cmd["flow"]}
        tm = threading.Timer(t - now, lambda: (
            self.events.put((host, {"ev": "done", **ev, "bytes": cmd["bytes"], "t": t})),
            self.events.put((host, {"ev": "sent", **ev, "t_start": now, "t_end": t}))))
        tm.start()
        self.timers.append(tm)


DRIVER_TRACE = """16 4
1 0 1 0 1 8:120
1 0 2 0 1 1 8:60 wave=2
2 0 1 2 1 9:60 after=1
3 0 1 3 1 10:20 pipe=2
"""


def test_driver_releases_waves_and_children_through_the_api(tmp_path):
    """The emulation's driver on a small DAG: a wave is AddFlows (a new host pair) and Update (a
    pair the coflow has: the flow grows) under the coflow's CoflowId; a child registers with its
    parent (Aalo's ids); nothing starts before its predecessors allow."""
    from coflow.api.registry import CoflowRegistry
    from coflow.emu import plan as P
    from coflow.emu.driver import drive
    p = tmp_path / "dag.txt"
    p.write_text(DRIVER_TRACE)
    plan = P.build_plan(T.read_trace(str(p)), [f"h{i}" for i in range(16)], 10, 16e6,
                        bytes_factor=1e-3, time_factor=1.0)
    assert plan.dynamics is not None and [c.bytes for c in plan.coflows] == [120_000, 60_000, 60_000, 20_000]
    reg = CoflowRegistry([f"h{i}" for i in range(16)])
    calls = []

    def register(flows, **kw):
        calls.append(("register", kw))
        return str(reg.register(flows, **kw).cid)

    def add_flows(cid, flows):
        calls.append(("add_flows", cid, [(s, d) for s, d, *_ in flows]))
        reg.add_flows(cid, flows)

    def update(cid, sizes):
        calls.append(("update", cid, dict(sizes)))
        reg.update(cid, sizes=sizes)

    def unregister(cid):
        calls.append(("unregister", cid))
        reg.unregister(cid)

    agents = FakeAgents()
    res = drive(plan, agents, register, unregister, run=1, clairvoyant=True, timeout_s=20, progress=False,
                add_flows=add_flows, update=update, lead_s=0.05)
    assert not res.timed_out and res.errors == [] and len(res.records) == 5
    assert res.registered == {0: "1.0", 1: "1.0", 2: "1.1", 3: "1.2"}
    assert calls[0] == ("register", {})
    assert ("add_flows", "1.0", [("h1", "h8")]) in calls
    assert ("update", "1.0", {0: 150_000}) in calls          # h0 -> h8 grows by wave 2's 30 kB
    assert ("register", {"parents": ["1.0"]}) in calls and ("register", {"parents": ["1.1"]}) in calls
    assert [c for c in calls if c[0] == "unregister"] == [("unregister", "1.0"), ("unregister", "1.1"),
                                                         ("unregister", "1.2")]
    done = {k: max(r.t_done for r in res.records if r.coflow == k) - res.t0 for k in range(4)}
    disp = {k: t - res.t0 for k, t in res.dispatched_at.items()}
    assert disp[1] >= done[0]                                  # wave 2 after wave 1
    assert disp[2] >= done[1] and res.start[1] >= res.complete[0]   # barrier child after coflow 1
    assert abs(disp[3] - disp[2]) < 0.2                        # pipelined child with its parent
    assert res.complete[2] >= res.complete[1] and res.complete[2] >= done[3]
    # lateness and the timeline count from each unit's release, not its line's arrival
    assert max(res.late_s) < 0.5 and all(0 <= f["dispatched"] < 0.5 for f in res.timeline(plan))
    recs, jobs = P.dynamic_report_records(plan, res.start, res.complete, res.registered)
    assert [r["coflow_id"] for r in recs] == ["1.0", "1.1", "1.2"] and len(jobs) == 1
    assert jobs[0]["jct_s"] >= jobs[0]["critical_path_s"] * 0.99


def test_driver_registers_a_child_with_every_parent(tmp_path):
    """A child with a barrier on two coflows is registered with both parents (``parents``), as
    the registry records them; it starts only after both are complete."""
    from coflow.api.registry import CoflowRegistry
    from coflow.emu import plan as P
    from coflow.emu.driver import drive
    p = tmp_path / "dag2.txt"
    p.write_text("16 3\n1 0 1 0 1 8:60\n2 0 1 1 1 9:120\n3 0 1 2 1 10:20 after=1,2\n")
    plan = P.build_plan(T.read_trace(str(p)), [f"h{i}" for i in range(16)], 10, 16e6,
                        bytes_factor=1e-3, time_factor=1.0)
    reg = CoflowRegistry([f"h{i}" for i in range(16)])
    calls = []

    def register(flows, **kw):
        calls.append(kw)
        return str(reg.register(flows, **kw).cid)

    agents = FakeAgents()
    res = drive(plan, agents, register, lambda cid: None, run=1, clairvoyant=True, timeout_s=20,
                progress=False, add_flows=None, update=None, lead_s=0.05)
    assert not res.timed_out and res.errors == []
    assert res.registered == {0: "1.0", 1: "1.1", 2: "1.2"}
    assert calls == [{}, {"external": 1}, {"parents": ["1.0", "1.1"]}]
    assert reg.get("1.2").to_dict()["parents"] == ["1.0", "1.1"] and str(reg.get("1.2").parent) == "1.0"
    assert res.start[2] >= max(res.complete[0], res.complete[1])
