"""D-CLAS: the range table from DclasParams(K=8) demotes a coflow exactly at each threshold.

The decision uses the bytes the coflow sent before the packet (Aalo's "bytes sent so far"):
with exactly T-1 bytes counted a probe stays in queue q, with exactly T it is in queue q+1.
Thresholds are scaled down (E=2, Q1=1500 B) so the test sends ~380 kB in total.
"""
from base_test import P4RuntimeTest, autocleanup, frame, pk
from coflow.params import DclasParams, hw_priority


class DclasThresholdTest(P4RuntimeTest):

    @autocleanup
    def runTest(self):
        params = DclasParams(K=8, E=2, Q1=1500)
        self.add_route("10.0.1.0", 24, 1)
        self.set_config(mode=pk.MODE_DCLAS)
        self.install_dclas(params)
        # a fresh coflow starts in the highest queue
        self.assertEqual(self.probe_prio(frame(self.fresh_coflow(), 100), 1), 7)
        for k, t in enumerate(params.thresholds(), start=1):
            t = int(t)
            below, at = self.fresh_coflow(), self.fresh_coflow()
            self.send_bytes(below, t - 1)
            self.send_bytes(at, t)
            self.assertEqual(self.probe_prio(frame(below, 100), 1), hw_priority(k),
                             f"{t - 1} bytes: expected Aalo queue {k}")
            self.assertEqual(self.probe_prio(frame(at, 100), 1), hw_priority(k + 1),
                             f"{t} bytes: expected Aalo queue {k + 1}")
            self.assertEqual(params.queue_of(t - 1), k)
            self.assertEqual(params.queue_of(t), k + 1)


class DclasPerHopTest(P4RuntimeTest):
    """Each packet's queue follows the bytes before it: a sequence of 1000-byte packets with
    Q1 = 2500 B is stamped 7, 7, 7, 6, ... (demoted once 3000 >= 2500 bytes were sent)."""

    @autocleanup
    def runTest(self):
        params = DclasParams(K=8, E=2, Q1=2500)
        self.add_route("10.0.1.0", 24, 1)
        self.install_dclas(params)
        cid = self.fresh_coflow()
        got = []
        for i in range(6):
            got.append(self.probe_prio(frame(cid, 1000, ident=i), 1))
        want = [hw_priority(params.queue_of(1000 * i)) for i in range(6)]
        self.assertEqual(got, want)
        self.assertEqual(want, [7, 7, 7, 6, 6, 5])
