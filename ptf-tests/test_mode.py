"""Mode selection through pipeline_config, no recompilation: the same coflow state gives each
mode's decision, and switching back restores the previous one."""
from base_test import P4RuntimeTest, autocleanup, frame, pk
from coflow.params import DclasParams


class ModeSwitchTest(P4RuntimeTest):

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        self.install_dclas(DclasParams(K=8, E=2, Q1=1000))
        cid = self.fresh_coflow()
        self.send_bytes(cid, 2500)                     # 2000 <= 2500 < 4000: Aalo queue 3, prio 5
        probe = lambda: self.probe_prio(frame(cid, 100), 1)  # noqa: E731
        self.set_config(mode=pk.MODE_DCLAS)
        self.assertEqual(probe(), 5)
        self.set_config(mode=pk.MODE_FAIR, fair_prio=2)
        self.assertEqual(probe(), 2)
        self.set_config(mode=pk.MODE_RATE, fair_prio=3)
        self.assertEqual(probe(), 3)
        self.set_config(mode=pk.MODE_FIFO_LM, fifo_base=cid.external - 2)
        self.assertEqual(probe(), 5)                   # rank 2, light
        self.set_config(mode=pk.MODE_FIFO_LM, fifo_base=cid.external - 2, heavy_bytes=2000)
        self.assertEqual(probe(), 4)                   # heavy: one rank down
        self.set_config(mode=pk.MODE_DCLAS)
        self.assertEqual(probe(), 5)
        # the bytes kept counting in every mode
        self.assertEqual(self.counter("coflow_bytes", self._slot_of(cid))[0], 2500 + 6 * 100)

    def _slot_of(self, cid):
        for ent in self.p4rt.read_table("coflow_slot"):
            te = ent.table_entry
            if int.from_bytes(te.match[0].exact.value, "big") == cid.external:
                return int.from_bytes(te.action.action.params[0].value, "big")
        self.fail("slot entry not found")


class ModeRestoredTest(P4RuntimeTest):
    """autocleanup put the default configuration back (D-CLAS, no thresholds: priority 7)."""

    def runTest(self):
        got = self.p4rt.read_default_entity(self.p4rt.p4info.table_id("pipeline_config"))
        params = {p.param_id: int.from_bytes(p.value, "big")
                  for p in got.table_entry.action.action.params}
        self.assertEqual(params[1], pk.MODE_DCLAS)
