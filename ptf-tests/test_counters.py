"""Per-coflow byte counters: exact byte counts, hash fallback slots, collisions, slot reuse,
and the per-queue enqueue/dequeue counters."""
from scapy.all import IP

from base_test import P4RuntimeTest, autocleanup, frame, new_coflow, pk


class CoflowBytesExactTest(P4RuntimeTest):
    """The mirrored counter of an assigned slot grows by exactly the frame bytes sent."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        cid = new_coflow()
        slot = 17
        self.assign_slot(cid, slot)
        sizes = [64, 100, 1500, 733, 1001]
        for i, size in enumerate(sizes):
            self.send(0, frame(cid, size, ident=i))
        self.drain(1, len(sizes))
        self.assertEqual(self.counter("coflow_bytes", slot), (sum(sizes), len(sizes)))
        # untagged traffic and another coflow do not touch the slot
        self.send(0, frame(None, 300))
        self.send(0, frame(new_coflow(), 300))
        self.drain(1, 2)
        self.assertEqual(self.counter("coflow_bytes", slot), (sum(sizes), len(sizes)))


class HashSlotTest(P4RuntimeTest):
    """A coflow without an assigned slot is counted in the hash slot packet.hash_slot() names."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        cid = new_coflow(internal=5)
        slot = pk.hash_slot(cid)
        b0, p0 = self.counter("coflow_bytes", slot)
        self.send(0, frame(cid, 400))
        self.send(0, frame(cid, 600))
        self.drain(1, 2)
        self.assertEqual(self.counter("coflow_bytes", slot), (b0 + 1000, p0 + 2))


class CollisionTest(P4RuntimeTest):
    """Two coflows hashing to one slot: the second one's packets are counted as collisions and
    the two share the slot's bytes (documented in p4src/README.md)."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 1)
        a = pk.CoflowId(3_000_000, 1)
        slot = pk.hash_slot(a)
        b = next(pk.CoflowId(e, 1) for e in range(3_000_001, 3_100_000)
                 if pk.hash_slot(pk.CoflowId(e, 1)) == slot)
        c0 = self.counter("slot_collisions", slot)[1]
        b0 = self.counter("coflow_bytes", slot)[0]
        self.send(0, frame(a, 500))                  # a owns the slot
        self.send(0, frame(b, 300))                  # b collides
        self.send(0, frame(b, 300))
        self.drain(1, 3)
        self.assertEqual(self.counter("slot_collisions", slot)[1], c0 + 2)
        self.assertEqual(self.counter("coflow_bytes", slot)[0], b0 + 1100)


class SlotReassignTest(P4RuntimeTest):
    """Re-assigning a slot to a new coflow restarts its bytes at 0: the new coflow starts in the
    highest D-CLAS queue although the slot's previous owner was demoted."""

    @autocleanup
    def runTest(self):
        from coflow.params import DclasParams
        self.add_route("10.0.1.0", 24, 1)
        self.install_dclas(DclasParams(K=8, E=2, Q1=1000))
        old, new = new_coflow(), new_coflow()
        self.assign_slot(old, 40)
        self.send_bytes(old, 1500)
        self.assertEqual(self.probe_prio(frame(old, 100), 1), 6)
        self.p4rt.delete(self.p4rt.table_entry("coflow_slot", {"external_id": old.external,
                                                               "internal_id": old.internal}))
        self.assign_slot(new, 40)
        self.assertEqual(self.probe_prio(frame(new, 100), 1), 7)


class QueueCountersTest(P4RuntimeTest):
    """queue_enq / queue_deq count per (egress port, priority); index = port * 8 + prio.

    queue_enq is indexed by the priority the pipeline hands the traffic manager
    (standard_metadata.priority) and queue_deq by the queue BMv2 put the packet in
    (standard_metadata.priority as egress sees it), not by the pipeline's decision (meta.prio):
    a packet put in the wrong queue moves the wrong index. Two coflows in two queues; every one
    of the port's 8 queues is checked, so a packet counted anywhere else fails the test."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.1.0", 24, 2)
        sent = {3: 5, 6: 3}                          # priority -> packets
        cids = {}
        for prio in sent:
            cids[prio] = new_coflow()
            self.set_override(cids[prio], prio)
        idx = [2 * 8 + p for p in range(8)]
        e0 = [self.counter("queue_enq", i) for i in idx]
        d0 = [self.counter("queue_deq", i) for i in idx]
        n = 0
        for prio, count in sent.items():
            for _ in range(count):
                self.send(0, frame(cids[prio], 200 + prio, ident=n))
                n += 1
        got = self.drain(2, n)
        # the stamp agrees with the queue
        self.assertEqual(sorted(pk.prio_of_tos(p[IP].tos) for p in got),
                         sorted(p for p, c in sent.items() for _ in range(c)))
        want = [((200 + p) * sent.get(p, 0), sent.get(p, 0)) for p in range(8)]
        enq = [(a[0] - b[0], a[1] - b[1]) for a, b in zip([self.counter("queue_enq", i) for i in idx], e0)]
        deq = [(a[0] - b[0], a[1] - b[1]) for a, b in zip([self.counter("queue_deq", i) for i in idx], d0)]
        self.assertEqual(enq, want, "queue_enq by priority 0..7 of port 2")
        self.assertEqual(deq, want, "queue_deq by priority 0..7 of port 2 (the queue BMv2 used)")
