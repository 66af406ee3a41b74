"""Emulated traffic manager: tc command generation (no root needed)."""
import pytest

from coflow.dataplane import tm
from coflow.params import DclasParams, hw_priority


def _find(cmds, *words):
    return [c for c in cmds if all(w in c for w in words)]


def _children(cmds):
    return [c for c in cmds if "class" in c and c[c.index("parent") + 1] == "1:1"]


def test_strict_tree():
    cmds = tm.htb_commands("sw1", tm.TmConfig(rate_kbit=400))
    assert cmds[0] == ["tc", "qdisc", "replace", "dev", "sw1", "root", "handle", "1:", "htb",
                       "default", "10"]
    assert _find(cmds, "classid", "1:1", "400kbit")
    children = _children(cmds)
    assert len(children) == 8
    # priority 7 (Aalo queue 1) gets HTB prio 0, priority 0 gets HTB prio 7
    c7 = _find(children, "1:17")[0]
    assert c7[c7.index("prio") + 1] == "0" and c7[c7.index("rate") + 1] == "1kbit"
    c0 = _find(children, "1:10")[0]
    assert c0[c0.index("prio") + 1] == "7" and c0[c0.index("ceil") + 1] == "400kbit"
    filters = _find(cmds, "filter")
    assert len(filters) == 8
    f7 = _find(filters, "1:17")[0]
    assert f7[f7.index("tos") + 1:f7.index("tos") + 3] == ["0xe0", "0xe0"]
    assert len(_find(cmds, "pfifo")) == 8


def test_weighted_rates_follow_weights():
    cfg = tm.TmConfig(rate_kbit=800, discipline=tm.WEIGHTED, weights=(3, 1), queues=2)
    assert cfg.prios() == [7, 6]
    assert cfg.child_rates_kbit() == {7: 600, 6: 200}
    assert cfg.child_quanta() == {7: 3 * 1514, 6: 1514}
    cmds = tm.htb_commands("e0", cfg, netns="ns1")
    assert all(c[:4] == ["ip", "netns", "exec", "ns1"] for c in cmds)
    kids = _children(cmds)
    assert all(k[k.index("prio") + 1] == "0" for k in kids)
    assert cmds[0][cmds[0].index("default") + 1] == "16"


def test_default_weights_are_aalos():
    cfg = tm.TmConfig(rate_kbit=8000, discipline=tm.WEIGHTED)
    assert cfg.queue_weights() == DclasParams(K=8).queue_weights()
    rates = cfg.child_rates_kbit()
    assert rates[hw_priority(1)] > rates[hw_priority(8)]


def test_validation():
    with pytest.raises(ValueError):
        tm.TmConfig(rate_kbit=0)
    with pytest.raises(ValueError):
        tm.TmConfig(rate_kbit=100, discipline="bogus")
    with pytest.raises(ValueError):
        tm.TmConfig(rate_kbit=100, weights=(1, 2))
    with pytest.raises(ValueError):
        tm.TmConfig(rate_kbit=4, min_rate_kbit=1)


def test_apply_and_clear_use_runner():
    seen = []
    tm.apply("x0", tm.TmConfig(rate_kbit=100), runner=seen.append)
    assert seen == tm.htb_commands("x0", tm.TmConfig(rate_kbit=100))
    seen.clear()
    tm.clear("x0", netns="n", runner=seen.append)
    assert seen == [["ip", "netns", "exec", "n", "tc", "qdisc", "del", "dev", "x0", "root"]]


def test_parse_class_stats():
    text = """class htb 1:1 root rate 400Kbit ceil 400Kbit burst 1600b cburst 1600b
 Sent 30280 bytes 20 pkt (dropped 0, overlimits 3 requeues 0)
class htb 1:17 parent 1:1 leaf 27: prio 0 rate 1Kbit ceil 400Kbit burst 1600b cburst 1600b
 Sent 15140 bytes 10 pkt (dropped 2, overlimits 0 requeues 0)
"""
    st = tm.parse_class_stats(text)
    assert st["1:1"] == {"bytes": 30280, "packets": 20, "dropped": 0}
    assert st["1:17"]["dropped"] == 2
