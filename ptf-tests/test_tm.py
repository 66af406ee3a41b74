"""The traffic manager at a congested port: the emulated one (controller/coflow/dataplane/tm.py)
and BMv2's own priority queues.

The egress veth of port 3 is shaped by an HTB tree; the pipeline picks the class through DSCP.
Traffic is paced into BMv2 (1.2 ms) faster than the shaped port drains it, so the backlog
builds in HTB, where the discipline decides the departure order. Both HTB tests also check,
per BMv2 queue, that each packet left BMv2 from the priority queue its class names
(queue_deq is indexed by the queue BMv2 used): the pipeline handed it to the traffic manager
with standard_metadata.priority, which HTB alone would never notice.

Bmv2QueuesTest needs no Linux shaping: BMv2 itself rate-limits each of the port's queues, so
only standard_metadata.priority separates the packets (DSCP plays no part there).
"""
import collections

from scapy.all import IP

from base_test import P4RuntimeTest, autocleanup, bmv2_cli, frame, pk, test_param
from coflow.dataplane import tm

PORT = 3


class _TmTest(P4RuntimeTest):

    def setUp(self):
        super().setUp()
        self.dev = test_param("swports").split(",")[PORT]

    def tearDown(self):
        tm.clear(self.dev)
        super().tearDown()

    def _deq(self) -> list[int]:
        """Packets dequeued from each of the port's 8 BMv2 priority queues (queue_deq is indexed
        by the queue BMv2 used: standard_metadata.priority as egress sees it)."""
        return [self.counter("queue_deq", PORT * 8 + p)[1] for p in range(8)]

    def assert_bmv2_queues(self, before: list[int], sent: dict):
        """Each packet left BMv2 from the priority queue its DSCP class names: the pipeline
        handed it to the traffic manager with standard_metadata.priority = its class, so a
        hardware traffic manager (or BMv2's own queues) would schedule it the same way."""
        got = [a - b for a, b in zip(self._deq(), before)]
        self.assertEqual(got, [sent.get(p, 0) for p in range(8)],
                         "packets per BMv2 queue of the port, priority 0..7")

    def _coflows(self, prios):
        """One coflow per priority, pinned there by an override."""
        out = {}
        for p in prios:
            cid = self.fresh_coflow()
            self.set_override(cid, p)
            out[p] = cid
        return out


class StrictPriorityTest(_TmTest):
    """40 low-priority (0) then 10 high-priority (7) packets into a 1 Mbit/s port: the high ones
    overtake the queued low ones. Nominally ~5 low leave while the burst is being sent, then the
    10 high, then ~35 low; the test asks for >= 20 low after the last high."""

    @autocleanup
    def runTest(self):
        tm.apply(self.dev, tm.TmConfig(rate_kbit=1000, discipline=tm.STRICT))
        self.add_route("10.0.1.0", 24, PORT)
        cids = self._coflows([0, 7])
        frames = ([frame(cids[0], 1000, ident=i) for i in range(40)]
                  + [frame(cids[7], 1000, ident=100 + i) for i in range(10)])
        deq0 = self._deq()
        for f in frames:                                  # built first: evenly paced sends
            self.send(0, f)
        got = self.recv_n(PORT, 50, timeout=5.0)
        order = [pk.prio_of_tos(p[IP].tos) for p in got]
        print("strict departures: " + "".join(str(p) for p in order))
        self.assertEqual(len(got), 50)
        last_high = max(i for i, p in enumerate(order) if p == 7)
        low_after = sum(1 for p in order[last_high + 1:] if p == 0)
        self.assertGreaterEqual(low_after, 20)
        # the 10 high ones leave back to back
        first_high = order.index(7)
        self.assertEqual(order[first_high:first_high + 10], [7] * 10)
        self.assert_bmv2_queues(deq0, {0: 40, 7: 10})


class WeightedSharingTest(_TmTest):
    """Three backlogged queues with weights 3:2:1 at a 1 Mbit/s port: over the departures while
    all three are backlogged each gets its weight's share within 10% (relative).

    Sizes are chosen so that the measurement is exact to about one packet per window:
    - HTB's quantum unit equals the frame size (TmConfig.mtu), so each DRR turn sends exactly
      `weight` frames and a round is 6 frames;
    - the peak backlog (~100 frames of 500 B) stays below the sending socket's buffer
      (wmem_default, 208 KiB, not settable per namespace): beyond it BMv2's transmit thread
      would block and its own strict-priority queues would reorder the excess;
    - the window (>= 60 departures, ~100 nominal) starts after 10 departures (queues filling)
      and ends where the heaviest queue has sent everything (then only two are backlogged)."""

    WEIGHTS = (3, 2, 1)
    PER_QUEUE = 60
    SIZE = 500

    @autocleanup
    def runTest(self):
        cfg = tm.TmConfig(rate_kbit=1000, discipline=tm.WEIGHTED, weights=self.WEIGHTS, queues=3,
                          mtu=self.SIZE)
        tm.apply(self.dev, cfg)
        self.add_route("10.0.1.0", 24, PORT)
        prios = cfg.prios()                               # [7, 6, 5]
        cids = self._coflows(prios)
        frames = [frame(cids[p], self.SIZE, ident=i)
                  for i in range(self.PER_QUEUE) for p in prios]
        deq0 = self._deq()
        for f in frames:
            self.send(0, f)
        got = self.recv_n(PORT, 3 * self.PER_QUEUE, timeout=8.0)
        order = [pk.prio_of_tos(p[IP].tos) for p in got]
        self.assertEqual(len(got), 3 * self.PER_QUEUE)
        # all three are backlogged until the first queue has sent everything it got
        end = max(i for i, q in enumerate(order) if q == prios[0])
        window = order[10:end - 5]
        share = collections.Counter(window)
        total = len(window)
        print("weighted departures: " + "".join(str(p) for p in order))
        print(f"weighted window {total} departures: "
              + ", ".join(f"prio {p}: {share[p] / total:.3f}" for p in prios))
        self.assertGreaterEqual(total, 60)
        self.assert_bmv2_queues(deq0, {p: self.PER_QUEUE for p in prios})
        wsum = sum(self.WEIGHTS)
        for p, w in zip(prios, self.WEIGHTS):
            want = w / wsum
            self.assertAlmostEqual(share[p] / total, want, delta=0.1 * want,
                                   msg=f"prio {p}: {share[p]}/{total} vs {want:.3f}")


class Bmv2QueuesTest(_TmTest):
    """BMv2's own queues, no Linux traffic manager: every priority queue of the port limited to
    25 packets/s by BMv2 (set_queue_rate, per queue: bmv2#1067), 30 low-priority (0) then 10
    high-priority (7) packets. In separate queues the high ones drain at their own 25 pps beside
    the low backlog and are all out while most low ones still wait; in one queue (the pipeline
    not writing standard_metadata.priority) they would leave last, FIFO behind the 30 low."""

    RATE_PPS = 25

    @autocleanup
    def runTest(self):
        try:
            bmv2_cli([f"set_queue_rate {self.RATE_PPS} {PORT}"])
        except RuntimeError as exc:
            self.skipTest(f"BMv2 queue rates need the Thrift CLI: {exc}")
        try:
            self.add_route("10.0.1.0", 24, PORT)
            cids = self._coflows([0, 7])
            frames = ([frame(cids[0], 500, ident=i) for i in range(30)]
                      + [frame(cids[7], 500, ident=100 + i) for i in range(10)])
            deq0 = self._deq()
            for f in frames:
                self.send(0, f)
            got = self.recv_n(PORT, 40, timeout=6.0)
        finally:
            bmv2_cli([f"set_queue_rate 0 {PORT}"])       # 0: no limit
        order = [pk.prio_of_tos(p[IP].tos) for p in got]
        print("bmv2 queues departures: " + "".join(str(p) for p in order))
        self.assertEqual(len(got), 40)
        last_high = max(i for i, p in enumerate(order) if p == 7)
        low_after = sum(1 for p in order[last_high + 1:] if p == 0)
        self.assertGreaterEqual(low_after, 10, "the high-priority packets waited behind the low")
        self.assert_bmv2_queues(deq0, {0: 30, 7: 10})
