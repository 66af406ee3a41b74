"""ECN marking on a port's virtual queue (p4src/include/control/ecn_marker.p4).

Each test uses its own egress port, so one test's queue level never meets another's. A level is
made exact first: one entry with the largest drain empties it (any elapsed time drains
everything), then ``drain = 0`` keeps it from draining, so it is exactly the bytes sent since.
"""
from scapy.all import IP, raw

from base_test import P4RuntimeTest, autocleanup, frame, new_coflow

from coflow.ctl.translate import vq_drain
from coflow.dataplane.constants import ECN_CE, VQ_SHIFT

NOT_ECT, ECT1, ECT0 = 0, 1, 2
FRAME = 500


def ecn(pkt) -> int:
    return pkt[IP].tos & 3


def checksum_ok(pkt) -> bool:
    ip = IP(raw(pkt[IP]))
    want = ip.chksum
    del ip.chksum
    return IP(raw(ip)).chksum == want


class EcnTest(P4RuntimeTest):
    def set_vq(self, port: int, drain: int, threshold_bytes: int, modify: bool = False):
        e = self.p4rt.table_entry("ecn_port", {"egress_port": port}, "set_vq",
                                  {"drain_per_us": drain, "threshold_level": threshold_bytes << VQ_SHIFT})
        (self.p4rt.modify if modify else self.p4rt.insert)(e)

    def through(self, port: int, tos: int, cid=None, n: int = 1, in_port: int = 0) -> list[int]:
        """Send ``n`` frames with ``tos`` towards ``port``; the ECN field of each received."""
        out = []
        for i in range(n):
            self.send(in_port, frame(cid, FRAME, dst=f"10.0.{port}.1", tos=tos, ident=i))
            p = self.drain(port, 1)[0]
            self.assertTrue(checksum_ok(p), "IPv4 checksum wrong after marking")
            out.append(ecn(p))
        return out

    def exact_level(self, port: int, threshold_bytes: int):
        """Entry on ``port`` whose level is exactly one FRAME and no longer drains: a frame
        under the largest drain (whatever was there drains in any elapsed time), then
        ``drain = 0``."""
        self.set_vq(port, 0xFFFFFFFF, threshold_bytes)
        self.through(port, NOT_ECT)
        self.set_vq(port, 0, threshold_bytes, modify=True)


class MarkAboveThresholdTest(EcnTest):
    """ECT(0) and ECT(1) frames are marked CE exactly while their queue's level exceeds the
    threshold; Not-ECT frames never are; a CE frame stays CE and is not counted again."""

    @autocleanup
    def runTest(self):
        port = 3
        self.add_route("10.0.3.0", 24, port)
        self.exact_level(port, threshold_bytes=3 * FRAME)      # level = 1 frame
        m0 = self.counter("ecn_marked", port)[1]
        # levels 2, 3 frames: not above 3; 4, 5: above
        self.assertEqual(self.through(port, ECT0, n=4), [ECT0, ECT0, ECN_CE, ECN_CE])
        self.assertEqual(self.through(port, NOT_ECT), [NOT_ECT])           # level 6: never marked
        self.assertEqual(self.through(port, ECT1), [ECN_CE])
        self.assertEqual(self.through(port, ECN_CE), [ECN_CE])             # stays CE
        # a new coflow's frame goes to another queue (D-CLAS's top class): this queue's
        # backlog does not mark it
        self.assertEqual(self.through(port, ECT0, cid=new_coflow()), [ECT0])
        self.assertEqual(self.counter("ecn_marked", port)[1] - m0, 3)


class NoEntryNoMarkTest(EcnTest):
    """A port without an ecn_port entry never marks, however much it sends."""

    @autocleanup
    def runTest(self):
        port = 4
        self.add_route("10.0.4.0", 24, port)
        m0 = self.counter("ecn_marked", port)[1]
        self.assertEqual(self.through(port, ECT0, n=8), [ECT0] * 8)
        self.assertEqual(self.counter("ecn_marked", port)[1], m0)


class DrainTest(EcnTest):
    """The level drains at the entry's rate: at 1 Gb/s, frames paced a millisecond apart never
    build a queue above one frame, while without draining the same frames are marked."""

    @autocleanup
    def runTest(self):
        port = 2
        self.add_route("10.0.2.0", 24, port)
        self.exact_level(port, threshold_bytes=FRAME + FRAME // 2)
        self.set_vq(port, vq_drain(1000.0), FRAME + FRAME // 2, modify=True)   # 1 Gb/s
        self.assertEqual(self.through(port, ECT0, n=6), [ECT0] * 6)
        self.set_vq(port, 0, FRAME + FRAME // 2, modify=True)
        # the level is exactly the last frame (everything before it drained): the next one
        # takes it to 2 frames, above 1.5, and so on
        self.assertEqual(self.through(port, ECT0, n=3), [ECN_CE] * 3)


class PerQueueTest(EcnTest):
    """Each queue of a port is marked on its own backlog: a full low queue does not mark a
    frame of another queue, and that queue's own backlog does. Frames come in on a fabric
    port, so their queue is the class their DSCP names."""

    @autocleanup
    def runTest(self):
        port, fabric_in = 1, 3
        self.add_route("10.0.1.0", 24, port)
        self.set_port_role(fabric_in, edge=False)
        low, high = 1 << 5, 6 << 5                        # DSCP CS1, CS6: queues 1 and 6
        self.set_vq(port, 0xFFFFFFFF, 2 * FRAME)
        self.through(port, low | NOT_ECT, in_port=fabric_in)
        self.through(port, high | NOT_ECT, in_port=fabric_in)
        self.set_vq(port, 0, 2 * FRAME, modify=True)     # both levels: exactly one frame
        # queue 1 goes to 2, 3, 4 frames: marked from the 3rd frame on
        self.assertEqual(self.through(port, low | ECT0, n=3, in_port=fabric_in),
                         [ECT0, ECN_CE, ECN_CE])
        # queue 6 is at one frame: its next frame (2 frames, not above 2) is not marked
        self.assertEqual(self.through(port, high | ECT0, in_port=fabric_in), [ECT0])
        self.assertEqual(self.through(port, high | ECT0, in_port=fabric_in), [ECN_CE])
