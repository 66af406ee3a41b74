"""Controller overrides beat the local decision (D-CLAS, FIFO-LM) and a fabric hop's stamp."""
from base_test import P4RuntimeTest, autocleanup, frame, pk
from coflow.params import DclasParams, hw_priority


class OverrideTest(P4RuntimeTest):

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        params = DclasParams(K=8, E=2, Q1=1000)
        self.install_dclas(params)
        fresh, big = self.fresh_coflow(), self.fresh_coflow()
        self.send_bytes(big, 5000)                       # local decision: Aalo queue 4, prio 4
        self.assertEqual(params.queue_of(5000), 4)
        self.assertEqual(self.probe_prio(frame(big, 100), 1), hw_priority(4))
        self.assertEqual(self.probe_prio(frame(fresh, 100), 1), 7)
        self.set_override(big, 7)                        # global D-CLAS / SEBF says: first
        self.set_override(fresh, 1)
        self.assertEqual(self.probe_prio(frame(big, 100), 1), 7)
        self.assertEqual(self.probe_prio(frame(fresh, 100), 1), 1)
        # in FIFO-LM mode too
        self.set_config(mode=pk.MODE_FIFO_LM, fifo_base=fresh.external)
        self.assertEqual(self.probe_prio(frame(fresh, 100), 1), 1)
        # and over the stamp at a fabric port
        self.set_port_role(2, edge=False)
        self.assertEqual(self.probe_prio(frame(fresh, 100, stamped=True, prio=6), 1,
                                         in_port=2), 1)
