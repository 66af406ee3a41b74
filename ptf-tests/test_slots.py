"""Counter-slot lifecycle and unregistered coflows (p4src/README.md, "What a host can gain by
lying"; coflow_counter.p4, coflow.p4).

- A hashed slot whose owner has been idle ``slot_idle_epochs`` epochs is taken over by the next
  coflow that hashes to it, with its bytes restarted at 0 (``slot_takeovers`` counts it).
- A hashed slot whose owner keeps sending stays a collision however long it has been owned.
- With ``managed`` set (a controller is in charge), a coflow without a ``coflow_slot`` entry is
  served at the lowest priority in every mode, below a registered coflow with the same bytes;
  without it (no controller), Aalo's fallback: the top queue, demoted by its hashed slot's bytes.

The pipeline_config here sets ``slot_idle_epochs`` to 2: an epoch is 2^EPOCH_SHIFT us
(1.05 s), and 2 epochs is the smallest age for which an owner sending every half second can
never look idle (with 1, a packet just before an epoch boundary and one just after would do).
"""
import time

from base_test import P4RuntimeTest, autocleanup, frame, pk
from coflow.dataplane.constants import EPOCH_SECONDS, PRIO_HIGHEST, PRIO_LOWEST
from coflow.params import DclasParams, hw_priority

IDLE = 2                                  # slot_idle_epochs written by these tests
# wall time that makes any slot idle for IDLE epochs: floor(t2/E) - floor(t1/E) >= IDLE
# whenever t2 - t1 >= IDLE * E; plus a margin for the switch's clock vs ours
IDLE_WAIT = IDLE * EPOCH_SECONDS + 0.3
D = DclasParams(K=8, E=2, Q1=1000)        # queue 1 below 1000 bytes, queue 2 below 2000


class _SlotTest(P4RuntimeTest):

    def hashed_pair(self, start: int) -> tuple:
        """(a, b, slot): two CoflowIds with no coflow_slot entry that hash to one slot, ``a``
        its owner with its first 100-byte packet (sent here), counted from 0 bytes. Slot
        registers persist between the tests of a run: a candidate whose slot another test's
        coflow still holds (a's packet collides) is skipped."""
        for e in range(start, start + 40):
            a = pk.CoflowId(e, 3)
            slot = pk.hash_slot(a)
            b = next(pk.CoflowId(x, 3) for x in range(start + 1000, start + 200_000)
                     if pk.hash_slot(pk.CoflowId(x, 3)) == slot)
            c0 = self.counter("slot_collisions", slot)[1]
            prio = self.probe_prio(frame(a, 100), 1)
            if self.counter("slot_collisions", slot)[1] == c0:
                self.assertEqual(prio, PRIO_HIGHEST)      # a owns it, from 0 bytes
                return a, b, slot
        self.fail("no free hashed slot found")

    def configure(self, **kw):
        self.add_route("10.0.1.0", 24, 1)
        self.install_dclas(D)
        self.set_config(mode=pk.MODE_DCLAS, slot_idle_epochs=IDLE, **kw)


class IdleSlotTakeoverTest(_SlotTest):
    """An idle hashed slot goes to the next coflow hashing to it, bytes from 0; the old owner
    is then the one that collides."""

    @autocleanup
    def runTest(self):
        self.configure()
        a, b, slot = self.hashed_pair(7_000_000)
        self.send_bytes(a, 1400)                          # a: 1500 bytes, Aalo queue 2
        self.assertEqual(self.probe_prio(frame(a, 100), 1), hw_priority(2))
        t0, c0 = self.counter("slot_takeovers", slot)[1], self.counter("slot_collisions", slot)[1]
        time.sleep(IDLE_WAIT)
        # b takes the slot over: its bytes restart at 0 (not a's 1600), so the top queue ...
        self.assertEqual(self.probe_prio(frame(b, 100), 1), hw_priority(1))
        self.assertEqual(self.counter("slot_takeovers", slot)[1], t0 + 1)
        self.assertEqual(self.counter("slot_collisions", slot)[1], c0)
        # ... and exactly b's bytes count from then on: 999 bytes keep it in queue 1, 1000 not
        self.send_bytes(b, 899)
        self.assertEqual(self.probe_prio(frame(b, 100), 1), hw_priority(1))   # 999 before it
        self.assertEqual(self.probe_prio(frame(b, 100), 1), hw_priority(2))   # 1099 before it
        # the old owner now shares b's slot as a collision, and takes nothing over
        self.assertEqual(self.probe_prio(frame(a, 100), 1), hw_priority(2))
        self.assertEqual(self.counter("slot_collisions", slot)[1], c0 + 1)
        self.assertEqual(self.counter("slot_takeovers", slot)[1], t0 + 1)


class BusySlotCollisionTest(_SlotTest):
    """An owner that keeps sending (every half epoch) keeps its hashed slot for longer than
    slot_idle_epochs: the other coflow collides and shares its bytes, takes nothing over.
    Only the owner's packets keep a slot busy: once the owner stops, the other coflow's
    colliding packets do not, and it takes the slot over after slot_idle_epochs."""

    @autocleanup
    def runTest(self):
        self.configure()
        a, b, slot = self.hashed_pair(7_100_000)
        self.send_bytes(a, 1400)                          # a: 1500 bytes
        t0, c0 = self.counter("slot_takeovers", slot)[1], self.counter("slot_collisions", slot)[1]
        end = time.time() + IDLE_WAIT + EPOCH_SECONDS
        n = 0
        while time.time() < end:                          # > IDLE epochs since a took it
            time.sleep(EPOCH_SECONDS / 2)
            self.probe_prio(frame(a, 100, ident=n), 1)
            n += 1
        # b collides: demoted by the shared bytes (a's 1500 + n * 100 >= 1000), not taken over
        self.assertLess(self.probe_prio(frame(b, 100), 1), hw_priority(1))
        self.assertEqual(self.counter("slot_collisions", slot)[1], c0 + 1)
        self.assertEqual(self.counter("slot_takeovers", slot)[1], t0)
        # a stops and b keeps sending every half epoch: b's colliding packets do not refresh
        # the slot's age, so once a has been idle IDLE epochs b takes the slot over (at one of
        # these packets, which one depends on the epoch boundaries) with its bytes from 0.
        # Were collisions to refresh the age, b would collide forever.
        end = time.time() + IDLE_WAIT
        n = 0
        while time.time() < end:
            time.sleep(EPOCH_SECONDS / 2)
            self.probe_prio(frame(b, 100, ident=n), 1)
            n += 1
        self.assertEqual(self.counter("slot_takeovers", slot)[1], t0 + 1)
        self.assertEqual(self.probe_prio(frame(b, 100), 1), hw_priority(1))   # < 1000 bytes since


class UnregisteredLastWhenManagedTest(_SlotTest):
    """managed = 1: a coflow without a coflow_slot entry is served at PRIO_LOWEST in every
    mode, while a registered one with the same bytes is higher; its bytes are still counted
    in its hashed slot."""

    @autocleanup
    def runTest(self):
        self.configure(managed=1)
        reg = self.fresh_coflow()                          # assigned slot: registered
        stranger = pk.CoflowId(reg.external - 5, 0)        # older than reg: FIFO-LM would favour it
        slot = pk.hash_slot(stranger)
        b0 = self.counter("coflow_bytes", slot)[0]
        probe = lambda cid: self.probe_prio(frame(cid, 100), 1)  # noqa: E731
        self.assertEqual((probe(reg), probe(stranger)), (PRIO_HIGHEST, PRIO_LOWEST))
        self.send_bytes(reg, 1400)
        self.send_bytes(stranger, 1400)
        self.assertEqual((probe(reg), probe(stranger)), (hw_priority(2), PRIO_LOWEST))
        for mode, kw, want in ((pk.MODE_FAIR, {"fair_prio": 4}, 4),
                               (pk.MODE_RATE, {"fair_prio": 3}, 3),
                               (pk.MODE_FIFO_LM, {"fifo_base": reg.external}, 7)):
            self.set_config(mode=mode, managed=1, slot_idle_epochs=IDLE, **kw)
            self.assertEqual((probe(reg), probe(stranger)), (want, PRIO_LOWEST), f"mode {mode}")
        # counted all the same (its hashed slot; the mirror counter keeps growing)
        self.assertEqual(self.counter("coflow_bytes", slot)[0], b0 + 100 + 1400 + 100 + 3 * 100)
        # a stamp it forges is ignored at an edge port; a fabric port trusts any stamp (the
        # topology's port roles are the trust boundary: p4src/README.md)
        self.set_port_role(2, edge=False)
        forged = frame(stranger, 100, stamped=True, prio=PRIO_HIGHEST)
        self.assertEqual(self.probe_prio(forged, 1, in_port=0), PRIO_LOWEST)
        self.assertEqual(self.probe_prio(forged, 1, in_port=2), PRIO_HIGHEST)
        # not stamped at a fabric port (no edge decided yet): decided there, served last
        self.assertEqual(self.probe_prio(frame(stranger, 100), 1, in_port=2), PRIO_LOWEST)


class UnregisteredTopWithoutControllerTest(_SlotTest):
    """managed = 0 (the compiled default: no controller): Aalo's fallback. A coflow without a
    coflow_slot entry starts in the top queue and is demoted by its hashed slot's bytes, like
    a registered one with the same bytes."""

    @autocleanup
    def runTest(self):
        self.configure(managed=0)
        reg = self.fresh_coflow()
        stranger, _, _ = self.hashed_pair(7_200_000)      # its first probe: the top queue
        probe = lambda cid: self.probe_prio(frame(cid, 100), 1)  # noqa: E731
        self.assertEqual(probe(reg), PRIO_HIGHEST)
        self.send_bytes(reg, 1400)
        self.send_bytes(stranger, 1300)                    # 100 + 1300 = 1400 before the probe
        self.assertEqual((probe(reg), probe(stranger)), (hw_priority(2), hw_priority(2)))
