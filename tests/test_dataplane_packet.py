"""CoflowId option: encoding, scapy layer, and the validator that mirrors the P4 parser."""
import struct

import pytest

from coflow.dataplane import packet as pk
from coflow.dataplane.packet import CoflowId, classify_frame, classify_ipv4

scapy = pytest.importorskip("scapy.all")
from scapy.all import IP, TCP, UDP, Ether, raw  # noqa: E402


def _ip_header(ihl=5, options=b"", total_len=None, ttl=64, proto=17, frag=0, mf=0, payload=b"\0" * 8,
               version=4):
    hdr_len = 20 + len(options)
    tl = total_len if total_len is not None else hdr_len + len(payload)
    flags = (mf << 13) | frag
    base = struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, 0, tl, 1, flags, ttl, proto, 0,
                       bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    return base + options + payload


def test_option_bytes_layout():
    b = pk.option_bytes(CoflowId(0x01020304, 5))
    assert b == bytes([0x9E, 8, 0, 5, 1, 2, 3, 4])
    assert b[0] >> 7 == 1            # copied bit
    assert b[0] & 0x1F == 30         # experimental option number
    assert pk.option_bytes(CoflowId(1, 0), stamped=True, prio=6)[2] == 0x86


def test_decode_roundtrip():
    for cid in (CoflowId(0), CoflowId(pk.MAX_EXTERNAL, pk.MAX_INTERNAL), CoflowId(42, 7)):
        for stamped, prio in ((False, 0), (True, 7), (True, 3)):
            assert pk.decode_option(pk.option_bytes(cid, stamped, prio)) == (cid, stamped, prio)


@pytest.mark.parametrize("bad", [b"\x9e\x08\x00", b"\x9f\x08" + bytes(6), b"\x9e\x00" + bytes(6),
                                 b"\x9e\xff" + bytes(6)])
def test_decode_rejects_malformed(bad):
    with pytest.raises(ValueError):
        pk.decode_option(bad)


def test_coflow_id_bounds_and_text():
    with pytest.raises(ValueError):
        CoflowId(-1)
    with pytest.raises(ValueError):
        CoflowId(1, 256)
    assert str(CoflowId(12, 3)) == "12.3"
    assert CoflowId.parse("12.3") == CoflowId(12, 3)
    with pytest.raises(ValueError):    # one rule everywhere: 'external.internal' (the API's)
        CoflowId.parse("9")


def test_scapy_layer_encode_decode():
    cid = CoflowId(123456, 9)
    p = Ether() / IP(options=[pk.coflow_option(cid, stamped=True, prio=5)]) / UDP() / (b"x" * 10)
    data = raw(p)
    ip = data[14:]
    assert ip[0] & 0xF == 7                      # IHL 7: 20 + 8 option bytes
    assert ip[20:28] == pk.option_bytes(cid, True, 5)
    back = Ether(data)
    opt = pk.find_coflow_option(back[IP])
    assert opt is not None and opt.coflow_id() == cid and opt.stamped == 1 and opt.prio == 5
    assert opt.copy_flag == 1 and opt.option == 30


def test_scapy_default_option_is_copied():
    opt = pk.IPOption_Coflow(external=1)
    assert raw(opt)[0] == 0x9E and raw(opt)[1] == 8


def test_classify_tagged_untagged():
    cid = CoflowId(77, 2)
    tagged = raw(Ether() / IP(options=[pk.coflow_option(cid)]) / TCP())
    c = classify_frame(tagged)
    assert c.drop == pk.DROP_NONE and c.coflow == cid and not c.stamped
    c = classify_frame(raw(Ether() / IP() / UDP()))
    assert c.drop == pk.DROP_NONE and not c.tagged
    # someone else's option first: untagged, forwarded
    rr = raw(Ether() / IP(options=[scapy.IPOption_RR(routers=["1.2.3.4"])]) / UDP())
    assert classify_frame(rr) == pk.Classified(pk.DROP_NONE)


def test_classify_malformed():
    opt = pk.option_bytes(CoflowId(5))
    # truncated option: IHL 7 but the frame ends inside the option
    assert classify_ipv4(_ip_header(ihl=7, options=opt, payload=b"")[:24]).drop == pk.DROP_TRUNCATED
    # option length 0 and 255
    for ln in (0, 255):
        bad = bytes([0x9E, ln]) + opt[2:]
        assert classify_ipv4(_ip_header(ihl=7, options=bad)).drop == pk.DROP_OPT_LEN
    # IHL that does not fit: 8-byte option in a 4-byte options area; IHL < 5; IHL past the end
    assert classify_ipv4(_ip_header(ihl=6, options=opt)).drop == pk.DROP_OPT_OVERFLOW
    assert classify_ipv4(_ip_header(ihl=4)).drop == pk.DROP_BAD_IHL
    assert classify_ipv4(_ip_header(ihl=15, options=opt, payload=b"")).drop == pk.DROP_TRUNCATED
    # version 6 under EtherType IPv4; non-IPv4 EtherType
    assert classify_ipv4(_ip_header(version=6)).drop == pk.DROP_BAD_VERSION
    assert classify_frame(raw(Ether(type=0x86DD) / (b"\0" * 40))).drop == pk.DROP_NOT_IPV4
    # total length inconsistent
    assert classify_ipv4(_ip_header(total_len=10)).drop == pk.DROP_TOTAL_LEN
    assert classify_ipv4(_ip_header(total_len=500)).drop == pk.DROP_TOTAL_LEN
    assert classify_ipv4(_ip_header(ttl=1)).drop == pk.DROP_TTL


def test_classify_other_options_of_type_9e_and_later_coflow_ids():
    """Type 0x9e with another valid length is someone else's option: forwarded untagged; a
    length below 2 or past the options area is malformed; truncation is found first (the
    switch's parser walks the options area before the sanity control looks at the length)."""
    opt = pk.option_bytes(CoflowId(5, 1))
    other = b"\x9e\x04\xab\xcd"                                   # option 30, 4 bytes
    for opts in (other + b"\x01" * 4, b"\x9e\x0c" + bytes(10) + b"\x00" * 2, other + opt):
        c = classify_ipv4(_ip_header(ihl=5 + len(opts) // 4, options=opts))
        assert c == pk.Classified(pk.DROP_NONE), opts   # untagged, even with our option after
    for ln in (0, 1, 13, 255):                                     # options area of 12 bytes
        bad = bytes([0x9E, ln]) + bytes(10)
        assert classify_ipv4(_ip_header(ihl=8, options=bad)).drop == pk.DROP_OPT_LEN, ln
    cut = _ip_header(ihl=8, options=b"\x9e\x00" + bytes(10), payload=b"")[:30]
    assert classify_ipv4(cut).drop == pk.DROP_TRUNCATED
    # a second CoflowId option after ours: tagged with the first
    c = classify_ipv4(_ip_header(ihl=9, options=opt + pk.option_bytes(CoflowId(6, 2))))
    assert c.drop == pk.DROP_NONE and c.coflow == CoflowId(5, 1)


def test_classify_fragments_forwarded_and_tagged():
    opt = pk.option_bytes(CoflowId(5, 1))
    first = _ip_header(ihl=7, options=opt, mf=1, payload=b"\0" * 16)
    later = _ip_header(ihl=7, options=opt, frag=2, payload=b"\0" * 3)   # no L4 header needed
    for f in (first, later):
        c = classify_ipv4(f)
        assert c.drop == pk.DROP_NONE and c.coflow == CoflowId(5, 1)


def test_dscp_helpers():
    assert [pk.dscp_of_prio(p) for p in (0, 7)] == [0, 56]
    assert pk.tos_of_prio(7) == 0xE0 and pk.prio_of_tos(0xE0) == 7
    with pytest.raises(ValueError):
        pk.dscp_of_prio(8)


def test_hash_slot_in_range():
    slots = [pk.hash_slot(CoflowId(i, j)) for i in range(128) for j in range(4)]
    assert all(pk.HASH_SLOT_BASE <= s < pk.HASH_SLOT_BASE + pk.HASH_SLOTS for s in slots)
    # Fibonacci hashing spreads structured ids better than a random function would (~324 of 512)
    assert len(set(slots)) > 330
    assert len(set(pk.hash_slot(CoflowId(i)) for i in range(512))) > 400
    assert pk.hash_slot(CoflowId(0, 0)) == pk.HASH_SLOT_BASE


class _FakeSock:
    def __init__(self, fail_errno=None):
        self.calls = []
        self.fail_errno = fail_errno

    def setsockopt(self, level, opt, value):
        import socket
        if opt == socket.IP_OPTIONS and self.fail_errno:
            raise OSError(self.fail_errno, "nope")
        self.calls.append((level, opt, value))


def test_set_socket_coflow_option_and_fallback():
    import errno
    import socket
    s = _FakeSock()
    assert pk.set_socket_coflow(s, CoflowId(3, 1)) == "option"
    assert s.calls == [(socket.IPPROTO_IP, socket.IP_OPTIONS, pk.option_bytes(CoflowId(3, 1)))]
    s = _FakeSock(errno.EINVAL)
    assert pk.set_socket_coflow(s, CoflowId(3, 1), fallback_prio=6) == "dscp"
    assert s.calls == [(socket.IPPROTO_IP, socket.IP_TOS, pk.tos_of_prio(6))]
    with pytest.raises(OSError):
        pk.set_socket_coflow(_FakeSock(errno.EINVAL), CoflowId(3, 1))
