"""The rate modes' grants against what the senders use: demand caps and the claims' clock.

:class:`GrantLedger` follows, per metered flow (coflow, src pos, dst pos), the rate its sender
was told to pace at and the payload bytes its edge counted at each reading of the closed loop
(``progress_s``). From the two it derives

- the flow's **demand cap** (``conserve``): a flow that used less than ``1 / (1 +
  demand_headroom)`` of what its rate allowed over ``SHORT_READINGS`` reading intervals in a
  row is capped at the fastest it used over its last ``DEMAND_WINDOW`` readings times ``1 +
  demand_headroom`` (at least ``min_Bps``), and the scheduler core backfills the
  rest to the others (:func:`coflow.sched.conserve.conserve`); a capped flow that uses
  ``DEMAND_PROBE`` of its cap has the cap doubled at each reading, and loses it once it reaches
  the link's rate; a cap is lowered again only when its flow uses less than ``CAP_LOWER`` of it
  (a policed sender's shortfall is not a lack of demand). A flow's first interval (its start)
  is not judged, nor is a flow whose application said every byte of it is **ready** to send
  (``Flow.ready`` in the coflow API: a shuffle's map output, written before the fetch): its
  sender never waits on its application, so what it leaves of its rate is what the network
  (a congested core link, a loss's recovery, its receiver) holds back, and handing that rate to
  flows that go into the same links helps none of them. A ready flow has no cap.
- the **grant it has held**: the integral of its rate (a capped flow's up to its cap) since
  its first counted byte, which the time claim check (:func:`overheld`) compares with what its declared bytes need.
"""
from __future__ import annotations

import math

from ..dataplane.constants import TCP_MSS_BYTES
from .rates import overrun

#: a capped flow that uses this much of its cap over an interval gets a doubled cap
DEMAND_PROBE = 0.7
#: a cap is lowered only when its flow uses less than this fraction of it: a sender that its
#: meter polices (an unpaced TCP reaches a fraction of its policer's rate) must not talk its cap
#: down reading after reading
CAP_LOWER = 0.25
#: a flow is capped (or its cap lowered) after this many short readings in a row: a burst
#: sent at half its rate between two readings is not a flow that does not want its rate
SHORT_READINGS = 2
#: a cap is what the flow used at the fastest of its last this many readings (times 1 +
#: headroom): a flow whose TCP stalls for a few readings in a loss's recovery keeps the cap of
#: the rate it ran at before, so its shortfall is not taken for a lack of demand
DEMAND_WINDOW = 6


class GrantLedger:
    """Per metered flow: [rate in force, since, grant held (bytes), last reading (t, bytes),
    bytes the rate allowed since that reading, cap or None, started, short readings in a row,
    the rates it used at its last ``DEMAND_WINDOW`` readings (bytes/s)]."""

    def __init__(self, headroom: float, min_Bps: float, uncap_Bps: float):
        self.headroom = float(headroom)
        self.min_Bps = float(min_Bps)
        self.uncap_Bps = float(uncap_Bps)   # a cap at least this is no cap (the link's rate)
        self._st: dict = {}
        self._of: dict = {}                 # cid -> its flows' keys
        self.caps_version = 0               # bumped whenever a cap changes

    # the rates -------------------------------------------------------------------------
    def set_rates(self, rates: dict, now: float) -> None:
        """``rates``: (cid, src, dst) -> payload bytes/s each sender paces at from ``now`` on
        (a flow not listed has no rate)."""
        for k, st in self._st.items():
            self._accrue(st, now)
            st[0] = float(rates.get(k, 0.0))
        for k, r in rates.items():
            if k not in self._st:
                self._st[k] = [float(r), now, 0.0, None, 0.0, None, False, 0, []]
                self._of.setdefault(k[0], []).append(k)

    @staticmethod
    def _accrue(st: list, now: float) -> None:
        dt = max(0.0, now - st[1])
        allowed = st[0] * dt
        st[4] += allowed
        if st[6]:
            # the grant held: its rate up to its cap (what the core gives a capped flow above its
            # cap is capacity no flow below its cap could use: no other coflow waits for it)
            st[2] += allowed if st[5] is None else min(st[0], st[5]) * dt
        st[1] = now

    # the readings ----------------------------------------------------------------------
    def observe(self, key, now: float, sent: int, ready: bool = False) -> bool:
        """The pair's payload bytes counted at ``now`` (``ready``: its application said every
        byte is ready to send, so no shortfall is a lack of demand); returns whether its cap
        changed."""
        st = self._st.get(key)
        if st is None:
            return False
        self._accrue(st, now)
        last = st[3]
        allowed, st[4] = st[4], 0.0
        st[3] = (now, sent)
        if sent > 0:
            st[6] = True
        if ready:                              # what it leaves, the network holds back
            st[7] = 0
            return self._set_cap(st, None)
        if last is None or last[1] <= 0 or sent <= last[1] and allowed <= 0:
            return False                       # its start: nothing to judge yet
        # (a flow in its last segments is judged as any other: its cap is at least twice what
        # it ran at over the window, and a flow that declared a few segments and trickles
        # past them is no flow finishing)
        dt = now - last[0]
        if dt <= 0 or allowed < 4 * TCP_MSS_BYTES:
            return False                       # too little rate to judge a shortfall
        used = max(0, sent - last[1])
        win = st[8]
        win.append(used / dt)
        if len(win) > DEMAND_WINDOW:
            del win[0]
        cap = st[5]
        if cap is not None and used >= DEMAND_PROBE * cap * dt:
            st[7] = 0
            return self._set_cap(st, cap * 2)  # it uses its cap: probe up
        if used * (1.0 + self.headroom) < allowed and (cap is None or used < CAP_LOWER * cap * dt):
            st[7] += 1
            if st[7] < SHORT_READINGS:
                return False
            want = max(max(win) * (1.0 + self.headroom), self.min_Bps)
            st[7] = 0
            if cap is None or want < cap:
                return self._set_cap(st, want)
            return False
        st[7] = 0
        return False

    def _set_cap(self, st: list, cap) -> bool:
        if cap is not None and cap >= self.uncap_Bps:
            cap = None
        if cap == st[5]:
            return False
        st[5] = cap
        self.caps_version += 1
        return True

    def cap(self, key) -> float:
        """The pair's demand cap, bytes/s (``inf``: none)."""
        st = self._st.get(key)
        return math.inf if st is None or st[5] is None else st[5]

    def keys(self) -> list:
        """The flows followed."""
        return list(self._st)

    def capped(self) -> int:
        return sum(1 for st in self._st.values() if st[5] is not None)

    def held(self, key, now: float | None = None) -> float:
        """Payload bytes the pair's rates allowed since its first counted byte."""
        st = self._st.get(key)
        if st is None:
            return 0.0
        if now is not None:
            self._accrue(st, now)
        return st[2]

    def held_pairs(self, cid, now: float | None = None) -> dict:
        """(src, dst) -> bytes held, for the pairs of coflow ``cid``."""
        out: dict = {}
        for k in self._of.get(cid, ()):
            out[(k[1], k[2])] = out.get((k[1], k[2]), 0.0) + self.held(k, now)
        return out

    def forget_except(self, live) -> None:
        for c in [c for c in self._of if c not in live]:
            for k in self._of.pop(c):
                del self._st[k]

    def cids(self) -> list:
        """The coflows with flows followed."""
        return list(self._of)


def ready_pairs(rec, host_port: dict) -> set:
    """The host pairs (src pos, dst pos) of coflow ``rec`` whose every flow is ready to send
    (``FlowSpec.ready``)."""
    out: set = set()
    not_ready: set = set()
    for f in rec.flows:
        k = (host_port[f.src], host_port[f.dst])
        (out if f.ready else not_ready).add(k)
    return out - not_ready


def overheld(rec, held: dict, host_port: dict, margin_frac: float, margin_bytes: int,
             slack_bytes: float, factor: float = 1.0):
    """Whether coflow ``rec`` held its grants for longer than its claims need: the first host
    pair whose grant held (``held``: (src pos, dst pos) -> bytes its rates allowed since its
    first counted byte, :meth:`GrantLedger.held_pairs`) passes ``factor`` x what its flows
    there declare (all known) x (1 + ``margin_frac``) + ``margin_bytes`` + ``slack_bytes``
    (``factor``: an honest paced TCP sender reaches about 3/4 of its rate), as ``(pair,
    held, declared)``; None when every claim holds. The byte check (:func:`coflow.ctl.rates.
    overrun`) compares the bytes *sent*; this one the time the grant was held, so a sender that
    trickles its bytes under the margin runs out of claim all the same."""
    return overrun(rec, held, host_port, margin_frac, margin_bytes, factor, slack_bytes)
