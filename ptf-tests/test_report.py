"""Report digests (report.p4, issue 29): the packet whose bytes cross a multiple of the slot's
report step sends one digest {slot, CoflowId, bytes after it} on the P4Runtime stream; the
packets before and after it inside one step send none; a slot without a report_step entry
never reports. The controller's side (coflow.ctl.digest) decodes the same digests.
"""
import queue

from base_test import P4RuntimeTest, autocleanup, frame

from coflow.ctl.digest import DIGEST_NAME, DigestFormat

STEP = 1024
MASK = ((1 << 64) - 1) & ~(STEP - 1)
QUIET_S = 0.3          # how long "no digest" is waited for
DIGEST_S = 3.0         # how long an expected digest may take


class _ReportTest(P4RuntimeTest):

    def listen(self):
        """Digests of this test's stream into a queue (the client's other events as before)."""
        got = queue.Queue()
        old = self.p4rt.on_event

        def on_event(client, kind, detail):
            if kind == "digest":
                got.put(detail)
            elif old is not None:
                old(client, kind, detail)
        self.p4rt.on_event = on_event
        self.addCleanup(setattr, self.p4rt, "on_event", old)
        info = self.p4rt.p4info.p4info
        self.fmt = DigestFormat.from_p4info(info)
        self.assertIsNotNone(self.fmt, f"no {DIGEST_NAME} digest in the P4Info")
        self.p4rt.configure_digest(self.fmt.digest_id)
        return got

    def entries(self, lst):
        self.p4rt.ack_digest(lst.digest_id, lst.list_id)
        # (slot, (external, internal), bytes): BMv2 has one pipe, every digest's is 0
        got = [self.fmt.decode(d) for d in lst.data]
        self.assertEqual({g[3] for g in got} - {0}, set())
        return [g[:3] for g in got]


class ReportCrossingTest(_ReportTest):
    """300-byte packets with a 1024-byte step: the running count 300, 600, 900, 1200, 1500,
    1800, 2100 crosses 1024 at the 4th packet and 2048 at the 7th: exactly two digests, from
    those packets, each carrying the count after it; list ids consecutive."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        got = self.listen()
        cid = self.fresh_coflow()
        slot = self.slot_of(cid)
        self.p4rt.insert(self.p4rt.table_entry("report_step", {"slot": slot}, "set_step",
                                               {"mask": MASK}))
        lists = []
        count = 0
        for i in range(7):
            before, count = count, count + 300
            self.send(0, frame(cid, 300, ident=i))
            self.drain(1, 1)
            if before // STEP != count // STEP:
                try:
                    lst = got.get(timeout=DIGEST_S)
                except queue.Empty:
                    self.fail(f"packet {i + 1} ({before} -> {count} bytes) crossed {STEP}: no digest")
                self.assertEqual(self.entries(lst), [(slot, (cid.external, cid.internal), count)])
                lists.append(lst.list_id)
            try:
                extra = got.get(timeout=QUIET_S)
                self.fail(f"packet {i + 1} ({before} -> {count} bytes): unexpected digest "
                          f"{self.entries(extra)}")
            except queue.Empty:
                pass
        self.assertEqual(len(lists), 2)
        self.assertEqual(lists[1], lists[0] + 1)


class ReportNoEntryTest(_ReportTest):
    """Without a report_step entry for its slot a coflow never reports, whatever it sends."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        got = self.listen()
        cid = self.fresh_coflow()
        for i in range(4):
            self.send(0, frame(cid, 1400, ident=i))
        self.drain(1, 4)
        with self.assertRaises(queue.Empty):
            got.get(timeout=QUIET_S * 2)
