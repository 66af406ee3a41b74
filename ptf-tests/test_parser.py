"""Parsing: tagged, untagged, other options, fragments, and every malformed case.

A malformed packet is dropped and counted under its reason (drop_reasons), never forwarded,
and the switch keeps forwarding afterwards.
"""
import struct

from ptf import testutils
from scapy.all import IP, Ether, IPOption_Router_Alert, IPOption_RR, raw

from base_test import (P4RuntimeTest, SWITCH_MAC, HOST_MAC, NO_PKT_TIMEOUT, autocleanup,
                       frame, new_coflow, pk)


class TaggedStampTest(P4RuntimeTest):
    """A tagged packet leaves with S=1 and the decided priority in the option and in DSCP,
    TTL - 1 and a correct checksum (compared byte for byte)."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        cid = new_coflow(internal=3)
        for proto in ("udp", "tcp"):
            pkt = frame(cid, 200, proto=proto)
            self.assert_forwarded(pkt, 1, prio=7)      # D-CLAS, no bytes yet: queue 1
        # a stamp set by the sender is ignored at an edge port
        self.assert_forwarded(frame(cid, 120, stamped=True, prio=2), 1, prio=7)


class UntaggedDefaultClassTest(P4RuntimeTest):
    """Untagged traffic is forwarded in the default class, which the controller configures."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        self.assert_forwarded(frame(None, 100), 1, prio=0)
        self.p4rt.modify(self.p4rt.table_entry("untagged_class", default=True,
                                               action="set_class", params={"prio": 5}))
        self.assert_forwarded(frame(None, 100, ident=2), 1, prio=5)
        # the DSCP fallback: a class-selector DSCP mapped to a class by the ternary table
        self.p4rt.insert(self.p4rt.table_entry("untagged_class", {"dscp": (6 << 3, 0x38)},
                                               "set_class", {"prio": 6}, priority=1))
        self.assert_forwarded(frame(None, 100, tos=pk.tos_of_prio(6)), 1, prio=6)
        self.assert_forwarded(frame(None, 100, tos=pk.tos_of_prio(2)), 1, prio=5)


class ControlSegmentClassTest(P4RuntimeTest):
    """The controller's control-segment entry (coflow.ctl.translate.control_class_entities):
    untagged TCP up to CONTROL_MAX_LEN bytes of IP length (pure ACKs, SYN-ACKs, FINs) goes in
    the top class at an edge; longer untagged TCP, small untagged UDP and tagged packets do not."""

    @autocleanup
    def runTest(self):
        from coflow.ctl.translate import CONTROL_MAX_LEN, IP_PROTO_TCP
        self.add_route("10.0.1.0", 24, 1)
        self.p4rt.insert(self.p4rt.table_entry(
            "untagged_class", {"protocol": (IP_PROTO_TCP, 0xFF), "ip_len": (0, CONTROL_MAX_LEN)},
            "set_class", {"prio": 7}, priority=10))
        eth = 14
        self.assert_forwarded(frame(None, eth + 52, proto="tcp"), 1, prio=7)      # ACK + timestamps
        self.assert_forwarded(frame(None, eth + CONTROL_MAX_LEN, proto="tcp", ident=2), 1, prio=7)
        self.assert_forwarded(frame(None, eth + CONTROL_MAX_LEN + 1, proto="tcp", ident=3), 1, prio=0)
        self.assert_forwarded(frame(None, 1514, proto="tcp", ident=4), 1, prio=0)
        self.assert_forwarded(frame(None, eth + 52, proto="udp", ident=5), 1, prio=0)
        # a DSCP the sender chose does not matter (don't care), and does not survive: CS7 is written
        self.assert_forwarded(frame(None, eth + 52, proto="tcp", tos=pk.tos_of_prio(1), ident=6), 1, prio=7)
        # tagged small TCP takes its coflow's decision (a fair-mode class), not the control class
        self.set_config(mode=pk.MODE_FAIR, fair_prio=3)
        self.assert_forwarded(frame(new_coflow(), eth + 60, proto="tcp", ident=7), 1, prio=3)


class OtherOptionsTest(P4RuntimeTest):
    """Someone else's option first: untagged but forwarded intact. The CoflowId option followed
    by more options: tagged, the rest kept."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        rr = IPOption_RR(routers=["1.2.3.4"])
        self.assert_forwarded(frame(None, 120, extra_options=[rr]), 1, prio=0)
        cid = new_coflow()
        pkt = frame(cid, 140, extra_options=[rr])
        self.assertEqual(pkt[IP].ihl, 5 + 2 + 2)
        self.assert_forwarded(pkt, 1, prio=7)


class CoflowIdAfterOtherOptionTest(P4RuntimeTest):
    """A CoflowId option that is not the first option (here after a Router Alert, RFC 2113) is
    not ours to read: the packet is forwarded untagged, in the default class, every option byte
    as it came (no stamp), and its bytes are not counted against that coflow."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        cid = self.fresh_coflow()                  # tagged, it would be in priority 7
        slot = self.slot_of(cid)
        ra = IPOption_Router_Alert()
        for i, proto in enumerate(("udp", "tcp")):
            pkt = frame(None, 160, proto=proto, ident=i,
                        extra_options=[ra, pk.coflow_option(cid)])
            self.assertEqual(pkt[IP].ihl, 5 + 1 + 2)
            self.assert_forwarded(pkt, 1, prio=0, tagged=False)
        self.assertEqual(self.counter("coflow_bytes", slot), (0, 0))
        # the same coflow as the first option is tagged and counted
        self.assert_forwarded(frame(cid, 160, ident=9, extra_options=[ra]), 1, prio=7)
        self.assertEqual(self.counter("coflow_bytes", slot), (160, 1))


class TwoCoflowIdsTest(P4RuntimeTest):
    """Two CoflowId options: the first decides (its override, its counter, its stamp); the
    second is opaque, kept byte for byte and never counted."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        first, second = self.fresh_coflow(), self.fresh_coflow()
        s1, s2 = self.slot_of(first), self.slot_of(second)
        self.set_override(first, 3)
        self.set_override(second, 5)
        pkt = frame(first, 200, extra_options=[pk.coflow_option(second)])
        self.assertEqual(pkt[IP].ihl, 5 + 2 + 2)
        self.assert_forwarded(pkt, 1, prio=3)      # stamps only the first option
        # swapped: the other one decides
        self.assert_forwarded(frame(second, 200, ident=2, extra_options=[pk.coflow_option(first)]),
                              1, prio=5)
        self.assertEqual(self.counter("coflow_bytes", s1), (200, 1))
        self.assertEqual(self.counter("coflow_bytes", s2), (200, 1))


def _with_checksum(data: bytes) -> bytes:
    """Ethernet + IPv4 bytes with the header checksum filled in."""
    from base_test import ip_checksum
    ihl = data[14] & 0xF
    hdr = bytearray(data[14:14 + ihl * 4])
    hdr[10:12] = b"\0\0"
    hdr[10:12] = ip_checksum(bytes(hdr)).to_bytes(2, "big")
    return data[:14] + bytes(hdr) + data[14 + ihl * 4:]


class OtherType9eOptionTest(P4RuntimeTest):
    """Option type 0x9e with a length other than 8 and valid (2 .. the options area) is someone
    else's use of experimental option 30: forwarded untagged, every option byte as it came, not
    dropped (DROP_OPT_LEN not counted). A CoflowId after it is not the first option: untagged."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        cid = self.fresh_coflow()
        cases = [
            ("option 30 of 4 bytes", b"\x9e\x04\xab\xcd"),
            ("option 30 of 2 bytes + NOPs", b"\x9e\x02\x01\x01"),
            ("option 30 of 12 bytes", b"\x9e\x0c" + bytes(range(1, 11))),
            ("option 30 of 4 bytes, then a CoflowId", b"\x9e\x04\x00\x00" + pk.option_bytes(cid)),
        ]
        before = self.drops(pk.DROP_OPT_LEN)
        for name, opts in cases:
            data = _with_checksum(raw(_eth(_raw_ip(5 + len(opts) // 4, opts, payload=b"\1" * 40))))
            self.assertEqual(pk.classify_frame(data), pk.Classified(pk.DROP_NONE), name)
            self.assert_forwarded(data, 1, prio=0, tagged=False)
        self.assertEqual(self.drops(pk.DROP_OPT_LEN), before, "a valid option 30 was dropped")
        self.assertEqual(self.counter("coflow_bytes", self.slot_of(cid)),
                         (0, 0))


class FragmentTest(P4RuntimeTest):
    """Fragments are forwarded and, carrying the copied option, tagged; later fragments have no
    L4 header to parse."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        cid = new_coflow()
        self.assert_forwarded(frame(cid, 200, flags="MF"), 1, prio=7)
        later = frame(cid, 200, frag=10)                # offset 80 bytes, no UDP header inside
        self.assert_forwarded(later, 1, prio=7)
        self.assert_forwarded(frame(None, 200, frag=10, ident=9), 1, prio=0)


def _raw_ip(ihl, options=b"", total_len=None, payload=b"\0" * 30, version=4, ttl=64, proto=17):
    hdr_len = 20 + len(options)
    tl = total_len if total_len is not None else hdr_len + len(payload)
    base = struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, 0, tl, 7, 0, ttl, proto, 0,
                       bytes([10, 0, 0, 1]), bytes([10, 0, 1, 1]))
    return base + options + payload


def _eth(payload, ethertype=0x0800):
    return Ether(src=HOST_MAC % 1, dst=SWITCH_MAC, type=ethertype) / payload


class MalformedTest(P4RuntimeTest):
    """Each malformed packet is dropped and counted under the expected reason; a valid packet
    sent after each one is still forwarded (the switch did not crash or wedge)."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        opt = pk.option_bytes(pk.CoflowId(4242, 1))
        cases = [
            ("truncated option", _eth(_raw_ip(7, opt, payload=b"")[:24]), pk.DROP_TRUNCATED),
            ("option length 0", _eth(_raw_ip(7, b"\x9e\x00" + opt[2:])), pk.DROP_OPT_LEN),
            ("option length 255", _eth(_raw_ip(7, b"\x9e\xff" + opt[2:])), pk.DROP_OPT_LEN),
            ("option 30, length 1", _eth(_raw_ip(6, b"\x9e\x01\x00\x00")), pk.DROP_OPT_LEN),
            ("option 30, length past the options area", _eth(_raw_ip(7, b"\x9e\x0c" + bytes(6))),
             pk.DROP_OPT_LEN),
            ("option 30 of length 0, frame ends in the options area",
             _eth(_raw_ip(8, b"\x9e\x00" + bytes(10), payload=b"")[:24]), pk.DROP_TRUNCATED),
            ("option past IHL", _eth(_raw_ip(6, opt)), pk.DROP_OPT_OVERFLOW),
            ("IHL 4", _eth(_raw_ip(4)), pk.DROP_BAD_IHL),
            ("IHL 0", _eth(_raw_ip(0)), pk.DROP_BAD_IHL),
            ("IHL 15 past the end", _eth(_raw_ip(15, opt, payload=b"")), pk.DROP_TRUNCATED),
            ("version 6 in IPv4", _eth(_raw_ip(5, version=6)), pk.DROP_BAD_VERSION),
            ("ARP (non-IPv4)", _eth(b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\0" * 20, 0x0806),
             pk.DROP_NOT_IPV4),
            ("IPv6 (non-IPv4)", _eth(b"\x60" + b"\0" * 47, 0x86DD), pk.DROP_NOT_IPV4),
            ("total length < IHL*4", _eth(_raw_ip(5, total_len=12)), pk.DROP_TOTAL_LEN),
            ("total length past frame", _eth(_raw_ip(5, total_len=400)), pk.DROP_TOTAL_LEN),
            ("frame ends inside the IPv4 header", _eth(_raw_ip(5)[:12]), pk.DROP_TRUNCATED),
            ("TTL 1", _eth(_raw_ip(5, ttl=1)), pk.DROP_TTL),
            ("UDP header cut", _eth(_raw_ip(5, payload=b"\0\0")), pk.DROP_TRUNCATED),
        ]
        for i, (name, bad, reason) in enumerate(cases):
            data = bad if isinstance(bad, bytes) else raw(bad)
            # the Python validator agrees with the switch on every case
            self.assertEqual(pk.classify_frame(data).drop, reason, name)
            before = self.drops(reason)
            self.send(0, data)
            testutils.verify_no_other_packets(self, timeout=NO_PKT_TIMEOUT)
            self.assertEqual(self.drops(reason), before + 1, f"{name}: drop not counted")
            good = frame(None, 100, ident=100 + i)
            self.assert_forwarded(good, 1, prio=0)
