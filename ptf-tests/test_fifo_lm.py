"""FIFO-LM (Baraat) on 8 queues: FIFO by external id, heavy coflows multiplexed one rank down."""
from base_test import P4RuntimeTest, autocleanup, frame, new_coflow, pk


class FifoOrderTest(P4RuntimeTest):
    """rank = ext - fifo_base is served at priority 7 - rank (saturating at priority 1)."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        base = new_coflow().external
        for _ in range(12):
            new_coflow()
        self.set_config(mode=pk.MODE_FIFO_LM, fifo_base=base)
        for rank, want in ((0, 7), (1, 6), (2, 5), (5, 2), (6, 1), (11, 1)):
            cid = pk.CoflowId(base + rank, 0)
            self.assertEqual(self.probe_prio(frame(cid, 100), 1), want, f"rank {rank}")
        # older than the base (finishing): served first
        self.assertEqual(self.probe_prio(frame(pk.CoflowId(base - 1, 0), 100), 1), 7)


class FifoHeavyTest(P4RuntimeTest):
    """A coflow whose locally seen bytes exceed heavy_bytes moves to the next coflow's queue:
    with exactly H bytes sent it is light, one packet later (> H) it is heavy."""

    HEAVY = 6000

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        head = self.fresh_coflow()
        nxt = pk.CoflowId(head.external + 1, 0)
        for _ in range(7):                          # reserve head+1 .. head+7
            new_coflow()
        self.set_config(mode=pk.MODE_FIFO_LM, fifo_base=head.external, heavy_bytes=self.HEAVY)
        self.send_bytes(head, self.HEAVY)
        self.assertEqual(self.probe_prio(frame(head, 100), 1), 7)   # exactly H sent: light
        self.assertEqual(self.probe_prio(frame(head, 100), 1), 6)   # H + 100 > H: heavy
        self.assertEqual(self.probe_prio(frame(nxt, 100), 1), 6)    # shares with the next one
        # a heavy coflow at the last rank stays there
        last = pk.CoflowId(head.external + 6, 0)
        self.assign_slot(last, 99)
        self.send_bytes(last, self.HEAVY + 1)
        self.assertEqual(self.probe_prio(frame(last, 100), 1), 1)
