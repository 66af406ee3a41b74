"""Routing: LPM and ECMP through the action selector (5-tuple hash, per-flow stickiness)."""
import collections

from scapy.all import UDP

from base_test import P4RuntimeTest, autocleanup, frame, pk


class LpmTest(P4RuntimeTest):
    """The longest matching prefix wins; a miss is dropped as no-route."""

    @autocleanup
    def runTest(self):
        self.add_route("10.0.0.0", 8, 1)
        self.add_route("10.0.3.0", 24, 2)
        self.assert_forwarded(frame(None, 100, dst="10.9.9.9"), 1, prio=0)
        self.assert_forwarded(frame(None, 100, dst="10.0.3.7"), 2, prio=0)
        before = self.drops(pk.DROP_NO_ROUTE)
        self.send(0, frame(None, 100, dst="192.168.0.1"))
        self.assertIsNone(self.recv(1, timeout=0.3))
        self.assertEqual(self.drops(pk.DROP_NO_ROUTE), before + 1)


class EcmpTest(P4RuntimeTest):
    """64 flows over a 4-member group: every member is used, no member takes more than half,
    and each flow's 4 packets all leave on one port (the hash is over the 5-tuple, so it is
    deterministic for fixed flows)."""

    FLOWS = 64
    PKTS = 4

    @autocleanup
    def runTest(self):
        ports = [1, 2, 3, 4]
        self.add_ecmp_route("10.0.2.0", 24, ports)
        port_of_flow = {}
        per_port = collections.Counter()
        for f in range(self.FLOWS):
            seen = set()
            for k in range(self.PKTS):
                self.send(0, frame(pk.CoflowId(9000 + f) if f % 2 else None, 100, dst="10.0.2.5",
                                   sport=10000 + f, dport=5000 + (f * 7) % 13, ident=k))
                p, got = self.recv_any()
                self.assertIsNotNone(got, f"flow {f} packet {k} lost")
                self.assertEqual(got[UDP].sport, 10000 + f)
                seen.add(p)
            self.assertEqual(len(seen), 1, f"flow {f} spread over ports {seen}")
            port_of_flow[f] = seen.pop()
            per_port[port_of_flow[f]] += 1
        print(f"ECMP flows per port: {dict(sorted(per_port.items()))}")
        print("ports by flow: " + "".join(str(port_of_flow[f]) for f in range(self.FLOWS)))
        self.assertEqual(set(per_port), set(ports), "a member got no flow")
        self.assertLessEqual(max(per_port.values()), self.FLOWS // 2)


class EcmpWindowTest(P4RuntimeTest):
    """The hash window (ecmp_window) changes which member a flow takes, independently of the
    other windows: over 64 flows on a 2-member group, two windows agree on about half of the
    flows (a switch that ignored its window would agree on all 64, and so would a fat-tree's
    layers: the polarization routing.p4 describes). Each window still uses both members and
    keeps each flow on one port."""

    FLOWS = 64

    def choices(self, shift):
        self.set_ecmp_window(shift)
        out = []
        for f in range(self.FLOWS):
            seen = set()
            for k in range(2):
                self.send(0, frame(None, 100, dst="10.0.2.5", sport=30000 + 11 * f,
                                   dport=5000 + f % 5, ident=k))
                p, got = self.recv_any()
                self.assertIsNotNone(got, f"window {shift} flow {f} packet {k} lost")
                seen.add(p)
            self.assertEqual(len(seen), 1, f"window {shift}: flow {f} spread over {seen}")
            out.append(seen.pop())
        return out

    @autocleanup
    def runTest(self):
        self.add_ecmp_route("10.0.2.0", 24, [1, 2])
        by = {s: self.choices(s) for s in (0, 8, 16)}
        for s, ports in by.items():
            print(f"window {s:2d}: " + "".join(str(p) for p in ports))
            self.assertEqual(set(ports), {1, 2}, f"window {s} used one member only")
        for a, b in ((0, 8), (0, 16), (8, 16)):
            same = sum(x == y for x, y in zip(by[a], by[b]))
            self.assertTrue(16 <= same <= 48, f"windows {a} and {b} agree on {same} of "
                                              f"{self.FLOWS} flows: not independent")


class EcmpFragmentTest(P4RuntimeTest):
    """All fragments of a datagram take one path (ports are not hashed for fragments)."""

    @autocleanup
    def runTest(self):
        ports = [1, 2, 3, 4]
        self.add_ecmp_route("10.0.2.0", 24, ports)
        for d in range(8):
            frags = [frame(None, 200, dst="10.0.2.9", src=f"10.0.0.{d + 1}", ident=d,
                           flags="MF"),
                     frame(None, 200, dst="10.0.2.9", src=f"10.0.0.{d + 1}", ident=d, frag=22)]
            seen = set()
            for fr in frags:
                self.send(0, fr)
                p, got = self.recv_any()
                self.assertIsNotNone(got, f"datagram {d} fragment lost")
                seen.add(p)
            self.assertEqual(len(seen), 1, f"datagram {d} fragments on ports {seen}")
