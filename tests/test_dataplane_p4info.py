"""P4Info name lookup and P4Runtime entity building from a small P4Info fixture.

The P4Runtime modules are the ones generated at first use (coflow.dataplane.p4rt_gen), which
run under any protobuf implementation.
"""
import importlib.util

import pytest

if importlib.util.find_spec("p4") is None:
    pytest.skip("p4runtime package not installed (pip install .[p4])", allow_module_level=True)

_RUN = True

if _RUN:
    from coflow.dataplane import p4rt  # noqa: E402

    P4INFO = """
    pkg_info { arch: "v1model" }
    tables {
      preamble { id: 100 name: "CoflowIngress.routing.routing_v4" alias: "routing_v4" }
      match_fields { id: 1 name: "ipv4_dst" bitwidth: 32 match_type: LPM }
      action_refs { id: 200 }
      implementation_id: 300
      size: 1024
    }
    tables {
      preamble { id: 101 name: "CoflowIngress.dclas.dclas_thresholds" alias: "dclas_thresholds" }
      match_fields { id: 1 name: "bytes" bitwidth: 64 match_type: RANGE }
      action_refs { id: 201 }
      size: 16
    }
    tables {
      preamble { id: 102 name: "CoflowIngress.override.coflow_override" alias: "coflow_override" }
      match_fields { id: 1 name: "external_id" bitwidth: 32 match_type: EXACT }
      match_fields { id: 2 name: "internal_id" bitwidth: 8 match_type: EXACT }
      action_refs { id: 202 }
      size: 1024
    }
    tables {
      preamble { id: 103 name: "CoflowIngress.default_class.untagged_class" alias: "untagged_class" }
      match_fields { id: 1 name: "dscp" bitwidth: 6 match_type: TERNARY }
      action_refs { id: 203 }
      size: 64
    }
    actions {
      preamble { id: 200 name: "CoflowIngress.routing.set_next_hop" alias: "set_next_hop" }
      params { id: 1 name: "port" bitwidth: 9 }
      params { id: 2 name: "smac" bitwidth: 48 }
      params { id: 3 name: "dmac" bitwidth: 48 }
    }
    actions {
      preamble { id: 201 name: "CoflowIngress.dclas.set_queue" alias: "dclas.set_queue" }
      params { id: 1 name: "prio" bitwidth: 3 }
    }
    actions {
      preamble { id: 202 name: "CoflowIngress.override.set_queue" alias: "override.set_queue" }
      params { id: 1 name: "prio" bitwidth: 3 }
    }
    actions {
      preamble { id: 203 name: "CoflowIngress.default_class.set_class" alias: "set_class" }
      params { id: 1 name: "prio" bitwidth: 3 }
    }
    action_profiles {
      preamble { id: 300 name: "CoflowIngress.routing.ecmp_selector" alias: "ecmp_selector" }
      table_ids: 100
      with_selector: true
      size: 1024
    }
    counters {
      preamble { id: 400 name: "CoflowIngress.coflow_counter.coflow_bytes" alias: "coflow_bytes" }
      spec { unit: BOTH }
      size: 1024
    }
    meters {
      preamble { id: 500 name: "CoflowIngress.flow_meter.flow_meters" alias: "flow_meters" }
      spec { unit: BYTES }
      size: 4096
    }
    """


    @pytest.fixture
    def helper():
        return p4rt.P4InfoHelper.from_text(P4INFO)


    @pytest.fixture
    def client(helper):
        return p4rt.P4RuntimeClient(p4info=helper)


    def test_lookup_by_full_name_alias_and_suffix(helper):
        assert helper.table_id("CoflowIngress.routing.routing_v4") == 100
        assert helper.table_id("routing_v4") == 100
        assert helper.table_id("routing.routing_v4") == 100
        assert helper.get_id("counters", "coflow_bytes") == 400
        assert helper.get_id("meters", "flow_meters") == 500
        assert helper.get_id("action_profiles", "ecmp_selector") == 300
        assert helper.action_id("dclas.set_queue") == 201
        assert helper.name_of("tables", 101) == "CoflowIngress.dclas.dclas_thresholds"
        assert helper.size("tables", "coflow_override") == 1024


    def test_ambiguous_and_missing(helper):
        with pytest.raises(KeyError, match="ambiguous"):
            helper.action_id("set_queue")
        with pytest.raises(KeyError):
            helper.table_id("nope")
        with pytest.raises(KeyError):
            helper.match_field("routing_v4", "nope")


    def test_encode_value():
        assert p4rt.encode_value(0, 9) == b"\x00"
        assert p4rt.encode_value(0x1FF, 9) == b"\x01\xff"
        assert p4rt.encode_value("10.0.0.1", 32) == bytes([10, 0, 0, 1])
        assert p4rt.encode_value("00:00:00:00:00:02", 48) == b"\x02"
        assert p4rt.encode_value(b"\x00\x05", 16) == b"\x05"
        with pytest.raises(ValueError):
            p4rt.encode_value(512, 9)
        with pytest.raises(ValueError):
            p4rt.encode_value(-1, 8)


    def test_table_entries(client):
        e = client.table_entry("routing_v4", {"ipv4_dst": ("10.0.1.0", 24)}, group_id=7)
        te = e.table_entry
        assert te.table_id == 100 and te.action.action_profile_group_id == 7
        assert te.match[0].lpm.value == bytes([10, 0, 1, 0]) and te.match[0].lpm.prefix_len == 24

        e = client.table_entry("dclas_thresholds", {"bytes": (1500, 2999)}, "dclas.set_queue",
                               {"prio": 6}, priority=10)
        te = e.table_entry
        assert te.priority == 10
        assert te.match[0].range.low == (1500).to_bytes(2, "big")
        assert te.match[0].range.high == (2999).to_bytes(2, "big")
        assert te.action.action.params[0].value == b"\x06"
        # a full range is a don't-care and is omitted
        e = client.table_entry("dclas_thresholds", {"bytes": (0, (1 << 64) - 1)}, "dclas.set_queue",
                               {"prio": 7}, priority=1)
        assert len(e.table_entry.match) == 0

        e = client.table_entry("coflow_override", {"external_id": 5, "internal_id": 0},
                               "override.set_queue", {"prio": 7})
        assert [m.exact.value for m in e.table_entry.match] == [b"\x05", b"\x00"]

        e = client.table_entry("untagged_class", {"dscp": (0x38, 0x38)}, "set_class", {"prio": 7},
                               priority=1)
        assert e.table_entry.match[0].ternary.mask == b"\x38"
        e = client.table_entry("untagged_class", {"dscp": (0, 0)}, "set_class", {"prio": 1},
                               priority=1)
        assert len(e.table_entry.match) == 0

        d = client.table_entry("untagged_class", default=True, action="set_class", params={"prio": 3})
        assert d.table_entry.is_default_action


    def test_profiles_counters_meters(client):
        m = client.member("ecmp_selector", 1, "set_next_hop",
                          {"port": 2, "smac": "00:00:00:00:00:01", "dmac": "00:00:00:00:00:02"})
        assert m.action_profile_member.action_profile_id == 300
        assert m.action_profile_member.action.params[0].value == b"\x02"
        g = client.group("ecmp_selector", 9, [1, 2, 3], max_size=8)
        assert [x.member_id for x in g.action_profile_group.members] == [1, 2, 3]
        c = client.counter_entity("coflow_bytes", 17)
        assert c.counter_entry.counter_id == 400 and c.counter_entry.index.index == 17
        me = client.meter_entity("flow_meters", 3, cir=125000, cburst=3000)
        cfg = me.meter_entry.config
        assert (cfg.cir, cfg.cburst, cfg.pir, cfg.pburst) == (125000, 3000, 125000, 3000)
        assert not client.meter_entity("flow_meters", 3).meter_entry.HasField("config")


    def test_unknown_param_rejected(client):
        with pytest.raises(KeyError):
            client.action("set_class", {"queue": 1})
