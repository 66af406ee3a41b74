"""Every hop agrees: at a fabric port the edge's stamp decides, without per-coflow state."""
from base_test import P4RuntimeTest, autocleanup, frame, pk


class FabricTrustsStampTest(P4RuntimeTest):

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        self.set_port_role(2, edge=False)
        cid = self.fresh_coflow()
        slot_bytes = self._slot_bytes(cid)
        # stamped at an edge: the fabric hop keeps priority 3 and counts nothing
        self.assertEqual(self.probe_prio(frame(cid, 200, stamped=True, prio=3), 1, in_port=2), 3)
        self.assertEqual(self._slot_bytes(cid), slot_bytes)
        # not stamped yet (no edge decided): decided and counted here
        self.assertEqual(self.probe_prio(frame(cid, 200), 1, in_port=2), 7)
        self.assertEqual(self._slot_bytes(cid), slot_bytes + 200)
        # untagged at a fabric port: the DSCP an edge wrote is the class
        self.assertEqual(self.probe_prio(frame(None, 100, tos=pk.tos_of_prio(4)), 1, in_port=2), 4)
        # the same packets at an edge port: the edge decides (ignores the sender's stamp/DSCP)
        self.assertEqual(self.probe_prio(frame(cid, 200, stamped=True, prio=3), 1, in_port=0), 7)
        self.assertEqual(self.probe_prio(frame(None, 100, tos=pk.tos_of_prio(4)), 1, in_port=0), 0)

    def _slot_bytes(self, cid):
        for ent in self.p4rt.read_table("coflow_slot"):
            te = ent.table_entry
            if int.from_bytes(te.match[0].exact.value, "big") == cid.external:
                slot = int.from_bytes(te.action.action.params[0].value, "big")
                return self.counter("coflow_bytes", slot)[0]
        self.fail("slot entry not found")
