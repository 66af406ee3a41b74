"""Mode selection through pipeline_config, no recompilation: the same coflow state gives each
mode's decision, and switching back restores the previous one."""
from base_test import HOST_MAC, SWITCH_MAC, P4RuntimeTest, autocleanup, frame, new_coflow, pk
from coflow.dataplane.constants import PRIO_LOWEST, SLOT_IDLE_EPOCHS
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
        self.assertEqual(self.counter("coflow_bytes", self.slot_of(cid))[0], 2500 + 6 * 100)


class ModeRestoredTest(P4RuntimeTest):
    """autocleanup puts the pipeline configuration back, whether the test body passes or
    fails: a body decorated like every test writes a configuration that differs from the
    initial one in every parameter, and after it returns (or raises) the default action reads
    back as before and the data plane decides as before. It does not rely on the previous
    test's last write (ModeSwitchTest ends in D-CLAS, the default) to notice a missing undo;
    it also checks that what it finds at its start is the compiled default."""

    def runTest(self):
        # the route the probes need is written outside any journal and removed by hand
        mid = self.add_route("10.0.1.0", 24, 1)
        try:
            self._check(new_coflow())
        finally:
            self.p4rt.delete(self.p4rt.table_entry("routing_v4", {"ipv4_dst": ("10.0.1.0", 24)},
                                                   member_id=mid))
            self.p4rt.delete(self.p4rt.member("ecmp_selector", mid, "set_next_hop",
                                              {"port": 1, "smac": SWITCH_MAC, "dmac": HOST_MAC % 2}))

    def _check(self, cid):
        before = self._config()
        # what the tests before this one (ModeSwitchTest among them) left: the compiled default
        self.assertEqual(before, {"mode": pk.MODE_DCLAS, "fair_prio": 4,
                                  "heavy_bytes": (1 << 64) - 1, "fifo_base": 0,
                                  "managed": 0, "slot_idle_epochs": SLOT_IDLE_EPOCHS})
        probe = lambda: self.probe_prio(frame(cid, 100), 1)  # noqa: E731
        prio_before = probe()
        changed = dict(mode=pk.MODE_FIFO_LM, fair_prio=(before["fair_prio"] + 1) % 8,
                       heavy_bytes=before["heavy_bytes"] // 2 + 1, fifo_base=cid.external - 3,
                       managed=1, slot_idle_epochs=before["slot_idle_epochs"] + 1)

        @autocleanup
        def body(test, fail):
            test.set_config(**changed)
            test.assertEqual(test._config(), changed)
            # managed: cid has no coflow_slot entry (unregistered), so it is served last
            # (without managed, FIFO-LM rank 3 would give it priority 4)
            test.assertEqual(probe(), PRIO_LOWEST)
            if fail:
                raise RuntimeError("the test body failed")

        body(self, False)
        self.assertEqual(self._config(), before, "not restored after a passing body")
        self.assertEqual(probe(), prio_before)
        with self.assertRaises(RuntimeError):
            body(self, True)
        self.assertEqual(self._config(), before, "not restored after a failing body")
        self.assertEqual(probe(), prio_before)

    def _config(self) -> dict:
        got = self.p4rt.read_default_entity(self.p4rt.p4info.table_id("pipeline_config"))
        names = {p.id: p.name for p in self.p4rt.p4info.get("actions", "set_config").params}
        return {names[p.param_id]: int.from_bytes(p.value, "big")
                for p in got.table_entry.action.action.params}
