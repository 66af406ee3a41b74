"""Topology generators, the file format, routes/ECMP and full bisection."""
from __future__ import annotations

import itertools
import json
import os
import random

import pytest

from coflow import topology as T
from coflow.cli import main as cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fattree_counts(k):
    t = T.fattree(k)
    assert len(t.hosts) == k ** 3 // 4
    roles = {r: sum(s.role == r for s in t.switches) for r in ("edge", "agg", "core")}
    assert roles == {"edge": k * k // 2, "agg": k * k // 2, "core": k * k // 4}
    # edge-agg: k/2*k/2 per pod; agg-core: k/2*k/2 per pod
    assert len(t.links) == k * (k // 2) ** 2 * 2
    # every switch has k ports, each used exactly once
    for s in t.switches:
        assert s.ports == tuple(range(1, k + 1))
        used = t.host_ports(s.name) + t.fabric_ports(s.name)
        assert sorted(used) == list(s.ports), s.name
    assert [s.name for s in t.edge_switches()] == [f"e{i}" for i in range(k * k // 2)]
    assert len({s.device_id for s in t.switches}) == len(t.switches)
    assert [h.index for h in t.hosts] == list(range(len(t.hosts)))


def test_leafspine_and_bigswitch_counts():
    t = T.leafspine(3, 2, 4)
    assert (len(t.hosts), len(t.switches), len(t.links)) == (12, 5, 6)
    assert [s.name for s in t.edge_switches()] == ["l0", "l1", "l2"]
    b = T.bigswitch(16)
    assert (len(b.hosts), len(b.switches), len(b.links)) == (16, 1, 0)
    assert b.host_ports("s0") == list(range(1, 17)) and b.fabric_ports("s0") == []


@pytest.mark.parametrize("bad", [0, 3, -2, 2.0, "4"])
def test_fattree_rejects_bad_k(bad):
    with pytest.raises(ValueError, match="even integer"):
        T.fattree(bad)


@pytest.mark.parametrize("t", [T.fattree(4), T.leafspine(2, 3, 2), T.bigswitch(5)], ids=lambda t: t.name)
def test_every_pair_reachable_over_equal_cost_paths(t):
    table = T.routes(t)
    for a, b in itertools.permutations(t.hosts, 2):
        ps = T.paths(t, a.name, b.name, table)
        assert ps, (a.name, b.name)
        assert len({len(p) for p in ps}) == 1  # all equal cost
        assert len({tuple(p) for p in ps}) == len(ps)  # distinct
        assert ps[0][0] == a.switch and all(p[-1] == b.switch for p in ps)


def test_fattree_k4_path_diversity_is_the_textbook_one():
    t = T.fattree(4)
    table = T.routes(t)
    # same edge: 1 path (1 switch); same pod: 2 paths via the 2 aggs; other pod: (k/2)^2 = 4 paths
    assert T.paths(t, "h0", "h1", table) == [["e0"]]
    assert sorted(T.paths(t, "h0", "h2", table)) == [["e0", "a0", "e1"], ["e0", "a1", "e1"]]
    inter = T.paths(t, "h0", "h15", table)
    assert len(inter) == 4 and {p[2] for p in inter} == {"c0", "c1", "c2", "c3"}
    # ECMP group sizes: an edge has k/2 uplinks towards any remote host
    e0 = {r.prefix: r.ports for r in table["e0"]}
    assert e0["10.0.0.1/32"] == (1,) and e0["10.0.0.16/32"] == (3, 4)
    # next hop MACs: the host's own MAC on the last hop, the neighbour switch's MAC otherwise
    r = next(r for r in table["e7"] if r.prefix == "10.0.0.16/32")
    assert r.next_hops == (T.NextHop(2, t.host("h15").mac),)
    r = next(r for r in table["e0"] if r.prefix == "10.0.0.16/32")
    assert [nh.dmac for nh in r.next_hops] == [t.switch("a0").mac, t.switch("a1").mac]


def test_fattree_is_non_blocking():
    """Full bisection: across any cut, the capacity is at least that of the hosts on the smaller
    side (max-flow / min-cut over unit links). Structured cuts plus random ones."""
    t = T.fattree(4)
    names = [h.name for h in t.hosts]
    cuts = [names[:8], names[:4], names[::2], names[:2], names[:1], names[4:12], names[1::4]]
    rng = random.Random(7)
    for _ in range(40):
        cuts.append(rng.sample(names, rng.randint(1, 15)))
    for side in cuts:
        need = min(len(side), len(names) - len(side))
        assert T.cut_capacity(t, side) >= need, side


def test_oversubscribed_leafspine_is_detected_by_the_cut():
    """The cut check can fail: 4 hosts per leaf over 2 spines is 2:1 oversubscribed."""
    t = T.leafspine(2, 2, 4)
    assert T.cut_capacity(t, [h.name for h in t.hosts_of("l0")]) == 2
    assert T.cut_capacity(T.leafspine(2, 4, 4), [h.name for h in T.leafspine(2, 4, 4).hosts_of("l0")]) == 4


def test_roundtrip_and_bundled_files_are_current(tmp_path):
    for t in (T.fattree(4), T.leafspine(2, 2, 4), T.bigswitch(16)):
        p = tmp_path / f"{t.name}.json"
        t.save(str(p))
        assert T.load(str(p)) == t
        bundled = os.path.join(REPO, "topologies", f"{t.name}.json")
        assert T.load(bundled) == t, f"{bundled} is stale: regenerate with coflow topo gen"


def test_neighbor_lookup():
    t = T.fattree(4)
    assert t.neighbor("e0", 1) == ("host", t.host("h0"))
    kind, sw, peer = t.neighbor("e0", 3)
    assert (kind, sw.name, peer) == ("switch", "a0", 1)
    assert t.host_by_ip("10.0.0.16").name == "h15" and t.host_by_index(3).name == "h3"
    assert t.switch("c3").intf(2) == "c3-eth2" and t.host("h3").intf == "h3-eth0"


# malformed files: one-line error naming the file and the field --------------------------------
def _mut(fn):
    d = json.loads(json.dumps(T.leafspine(2, 1, 2).to_dict()))
    fn(d)
    return d


BAD = [
    (lambda d: d.update(format="other/1"), "format"),
    (lambda d: d.update(kind="torus"), "kind"),
    (lambda d: d.pop("hosts"), "top.hosts: missing"),
    (lambda d: d.update(hosts=[]), "hosts: empty"),
    (lambda d: d["hosts"][1].update(ip="10.0.0.300"), "hosts[1].ip"),
    (lambda d: d["hosts"][1].update(ip=d["hosts"][0]["ip"]), "hosts[1].ip: duplicate"),
    (lambda d: d["hosts"][2].update(mac="zz:00:00:00:00:00"), "hosts[2].mac"),
    (lambda d: d["hosts"][0].update(switch="nope"), "hosts[0].port: unknown switch"),
    (lambda d: d["hosts"][0].update(port=99), "hosts[0].port: switch l0 has no port 99"),
    (lambda d: d["hosts"][1].update(port=1), "hosts[1].port: port l0:1 used twice"),
    (lambda d: d["hosts"][1].update(index=7), "index must number"),
    (lambda d: d["hosts"][1].update(index="1"), "hosts[1].index: expected an integer"),
    (lambda d: d["hosts"][1].update(name="H-1"), "hosts[1].name"),
    (lambda d: d["switches"][0].update(role="router"), "switches[0].role"),
    (lambda d: d["switches"][1].update(device_id=d["switches"][0]["device_id"]), "switches[1].device_id: duplicate"),
    (lambda d: d["switches"][0].update(ports=[1, 1]), "switches[0].ports"),
    (lambda d: d["switches"][0].update(edge="yes"), "switches[0].edge"),
    (lambda d: d["links"][0].update(b="l0"), "links[0]: a switch linked to itself"),
    (lambda d: d["links"][0].update(a_port=1), "links[0].a_port: port l0:1 used twice"),
    (lambda d: d["links"].pop(), "not connected"),
]


@pytest.mark.parametrize("mutate,msg", BAD, ids=[m for _, m in BAD])
def test_malformed_topology_files(tmp_path, capsys, mutate, msg):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_mut(mutate)))
    with pytest.raises(T.TopologyError) as e:
        T.load(str(p))
    assert msg in str(e.value) and str(e.value).startswith(str(p) + ": ")
    assert "\n" not in str(e.value)
    assert cli(["topo", "show", str(p)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_invalid_json_names_the_line(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{\n "format": "coflow-topology/1",\n oops\n}')
    with pytest.raises(T.TopologyError, match=rf"^{p}:3: invalid JSON"):
        T.load(str(p))
    with pytest.raises(T.TopologyError, match="No such file"):
        T.load(str(tmp_path / "missing.json"))


def test_cli_gen_and_show(tmp_path, capsys):
    out = tmp_path / "ft.json"
    assert cli(["topo", "gen", "fattree", "--k", "4", "-o", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["switches"] == 20
    assert cli(["topo", "show", str(out), "--routes", "e0"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["routes"]["e0"]["10.0.0.16/32"] == [3, 4]
