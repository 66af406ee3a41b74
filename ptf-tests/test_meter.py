"""Indirect flow meters at the sender's edge: RED packets are dropped and counted, GREEN and
YELLOW ones pass and are counted per meter in ``flow_bytes`` (the rate modes' progress).

Rates are P4Runtime units: bytes per second. The offered load is ~1000-byte frames every
~1.2 ms (~800 kB/s); the limits below leave wide margins on both sides.
"""
import time

from base_test import P4RuntimeTest, autocleanup, frame, pk


class MeterTest(P4RuntimeTest):
    N = 100
    SIZE = 1000

    def _flow(self, cid, src, idx):
        self.p4rt.insert(self.p4rt.table_entry(
            "flow_meter", {"external_id": cid.external, "internal_id": cid.internal,
                           "ipv4_src": src, "ipv4_dst": "10.0.1.1"},
            "set_meter", {"index": idx}))

    def _blast(self, cid, src):
        t0 = time.time()
        for i in range(self.N):
            self.send(0, frame(cid, self.SIZE, src=src, ident=i))
        elapsed = time.time() - t0
        got = self.recv_n(1, self.N, timeout=2.0)
        return len(got), elapsed

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        self.set_config(mode=pk.MODE_RATE, fair_prio=7)   # meters run in rate-controlled mode
        cid = self.fresh_coflow()
        slow_idx, fast_idx = 800, 801
        rate, burst = 20_000, 3_000                     # 20 kB/s, 3 frames of burst
        self.p4rt.set_meter("flow_meters", slow_idx, cir=rate, cburst=burst)
        self.p4rt.set_meter("flow_meters", fast_idx, cir=50_000_000, cburst=200_000)
        cfg = self.p4rt.read_meter("flow_meters", slow_idx)
        self.assertEqual((cfg.cir, cfg.cburst, cfg.pir, cfg.pburst), (rate, burst, rate, burst))
        self._flow(cid, "10.0.0.1", slow_idx)
        self._flow(cid, "10.0.0.2", fast_idx)
        red0 = self.drops(pk.DROP_METER_RED)
        slot_red0 = self.counter("meter_red_drops", slow_idx)[1]
        fb0 = self.counter("flow_bytes", slow_idx)
        fast0 = self.counter("flow_bytes", fast_idx)
        qdrop0 = self.counter("queue_drop", 1 * 8 + 7)[1]

        # above its rate: at most burst + rate * elapsed bytes pass (+2 frames of slack)
        passed, elapsed = self._blast(cid, "10.0.0.1")
        # +3 frames: BMv2 timestamps packets when it processes them, up to a few ms after the
        # send loop measured them (100+ ms of slack at 20 kB/s)
        allowed = (burst + rate * elapsed) / self.SIZE + 3
        print(f"meter above rate: {passed}/{self.N} passed in {elapsed:.3f}s (allowed {allowed:.1f})")
        self.assertGreaterEqual(passed, 1)
        self.assertLessEqual(passed, allowed)
        dropped = self.N - passed
        self.assertEqual(self.counter("meter_red_drops", slow_idx)[1], slot_red0 + dropped)
        self.assertEqual(self.drops(pk.DROP_METER_RED), red0 + dropped)
        self.assertEqual(self.counter("queue_drop", 1 * 8 + 7)[1], qdrop0 + dropped)
        # flow_bytes counts exactly what passed the meter (frame bytes, packets), not the RED
        fb1 = self.counter("flow_bytes", slow_idx)
        self.assertEqual((fb1[0] - fb0[0], fb1[1] - fb0[1]), (passed * self.SIZE, passed))

        # below its rate: every packet passes, and is counted at its own meter index only
        passed, _ = self._blast(cid, "10.0.0.2")
        self.assertEqual(passed, self.N)
        fast1 = self.counter("flow_bytes", fast_idx)
        self.assertEqual((fast1[0] - fast0[0], fast1[1] - fast0[1]), (self.N * self.SIZE, self.N))
        self.assertEqual(self.counter("flow_bytes", slow_idx), fb1)
        self.assertEqual(self.drops(pk.DROP_METER_RED), red0 + dropped)

        # unmetered flow of the same coflow: no meter, no drop
        passed, _ = self._blast(cid, "10.0.0.3")
        self.assertEqual(passed, self.N)

        # outside rate-controlled mode the meters are not applied
        self.set_config(mode=pk.MODE_DCLAS)
        passed, _ = self._blast(cid, "10.0.0.1")
        self.assertEqual(passed, self.N)


class MeterYellowMarksEcnTest(P4RuntimeTest):
    """cir = pir, pburst = 4 x cburst: past the committed burst the meter says YELLOW, and an
    ECN-capable packet leaves marked CE instead of being dropped; past the peak burst it is RED
    and dropped. A Not-ECT packet is never marked (it passes YELLOW, or is dropped RED)."""
    N = 40
    SIZE = 1000

    @autocleanup
    def runTest(self):
        from scapy.all import IP
        self.add_route("10.0.1.0", 24, 1)
        self.set_config(mode=pk.MODE_RATE, fair_prio=7)
        cid = self.fresh_coflow()
        rate, cburst, pburst = 2_000, 3_000, 12_000     # 3 frames green, ~9 more yellow
        for idx, src in ((810, "10.0.0.1"), (811, "10.0.0.2")):
            self.p4rt.set_meter("flow_meters", idx, cir=rate, cburst=cburst, pir=rate, pburst=pburst)
            self.p4rt.insert(self.p4rt.table_entry(
                "flow_meter", {"external_id": cid.external, "internal_id": cid.internal,
                               "ipv4_src": src, "ipv4_dst": "10.0.1.1"},
                "set_meter", {"index": idx}))

        def blast(src, tos):
            t0 = time.time()
            for i in range(self.N):
                self.send(0, frame(cid, self.SIZE, src=src, ident=i, tos=tos))
            elapsed = time.time() - t0
            got = self.recv_n(1, self.N, timeout=2.0)
            return [p[IP].tos & 3 for p in got], elapsed

        ecn, elapsed = blast("10.0.0.1", 2)            # ECT(0)
        trickle = rate * elapsed / self.SIZE + 2        # tokens refilled meanwhile (+ slack)
        green, ce = ecn.count(2), ecn.count(3)
        print(f"ECT: {green} unmarked, {ce} marked CE of {self.N} in {elapsed:.3f} s")
        self.assertEqual(green + ce, len(ecn))
        self.assertLessEqual(green, cburst / self.SIZE + trickle)
        self.assertGreaterEqual(ce, (pburst - cburst) / self.SIZE - 1)
        self.assertLessEqual(len(ecn), pburst / self.SIZE + trickle)
        self.assertEqual(ecn[:green], [2] * green)      # green first, then marks
        # the meter counts its own marks (apart from the ports' queue marks)
        self.assertEqual(self.counter("meter_marked", 810)[1], ce)
        plain, _ = blast("10.0.0.2", 0)                 # Not-ECT: the same colours, no mark
        self.assertEqual(set(plain), {0})
        self.assertGreaterEqual(len(plain), pburst / self.SIZE - 1)
        self.assertEqual(self.counter("meter_marked", 811)[1], 0)
