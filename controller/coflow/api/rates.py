"""The rates a controller gives each flow, as the coflow API's ``WatchRates`` stream serves them
(issue 27): senders that pace themselves at their rates, as Varys's and Utopia's client
libraries did, instead of leaving the switches' meters to drop what exceeds them.

The controller publishes, after every allocation, one :class:`CoflowRates` per registered
coflow (its active flows' rates in payload bytes/s, whether a meter holds each one to it, and
the coflow's class) on a :class:`RateBoard`; every open stream waits on the board and sends
what changed for the coflows it watches. The board lives as long as its controller: a
restarted controller has a new board (a new ``instance``), and its streams start over.
"""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class FlowRate:
    flow_id: int
    src: str
    dst: str
    rate_Bps: float      # payload bytes/s (meaningful when limited)
    limited: bool        # a meter holds the flow to rate_Bps (False: no rate set)


@dataclass(frozen=True)
class CoflowRates:
    cid: str                     # "external.internal"
    flows: tuple                 # FlowRate, by flow id: the coflow's active flows
    priority: int | None = None  # its class (BMv2 priority); None = the fair class

    def from_host(self, src: str) -> "CoflowRates":
        """The flows ``src`` sends."""
        return CoflowRates(self.cid, tuple(f for f in self.flows if f.src == src), self.priority)


class RateBoard:
    """The controller's current rates, with a change epoch that streams wait on."""

    def __init__(self) -> None:
        self.instance = uuid.uuid4().hex[:12]
        self._cond = threading.Condition()
        self._rates: dict[str, CoflowRates] = {}
        self._pending: Callable[[], dict] | None = None   # builds the next rates (lazy publish)
        self._hosts: tuple | None = None   # (rates, {host: {cid: its flows}}), per publication
        self._epoch = 0
        self._at = 0.0
        self._closed = False
        self._watchers = 0

    @property
    def watchers(self) -> int:
        """Streams open on this board."""
        with self._cond:
            return self._watchers

    def publish(self, rates, at: float) -> bool:
        """Replace the rates: a dict (cid string -> :class:`CoflowRates`, every registered
        coflow), or a function returning one, called only when a stream reads the board (a
        controller without streams builds nothing). The epoch bumps and streams wake up;
        returns False when a dict equal to the current one changes nothing."""
        with self._cond:
            if callable(rates):
                self._pending = rates
            else:
                if self._pending is None and rates == self._rates:
                    return False
                self._pending = None
                self._rates = dict(rates)
            self._epoch += 1
            self._at = at
            self._cond.notify_all()
            return True

    def _current(self) -> dict:
        if self._pending is not None:
            fn, self._pending = self._pending, None
            self._rates = fn()
            self._hosts = None
        return self._rates

    def host_view(self, src: str, rates: dict) -> dict:
        """cid -> the flows ``src`` sends (:meth:`CoflowRates.from_host`) of every coflow of
        ``rates`` (a snapshot's) that has some; one pass over the flows per snapshot, shared by
        every stream that asks (each agent watches its host's)."""
        with self._cond:
            if self._hosts is None or self._hosts[0] is not rates:
                by: dict = {}
                for cid, cr in rates.items():
                    per: dict = {}
                    for f in cr.flows:
                        per.setdefault(f.src, []).append(f)
                    for h, fl in per.items():
                        by.setdefault(h, {})[cid] = CoflowRates(cid, tuple(fl), cr.priority)
                self._hosts = (rates, by)
            return self._hosts[1].get(src, {})

    def snapshot(self) -> tuple[int, float, dict]:
        """``(epoch, at, rates)``; ``rates`` is never mutated afterwards."""
        with self._cond:
            return self._epoch, self._at, self._current()

    def wait(self, epoch: int, timeout: float) -> tuple[int, float, dict]:
        """The snapshot once the epoch differs from ``epoch`` (or the board closed), at most
        ``timeout`` s later."""
        with self._cond:
            self._cond.wait_for(lambda: self._epoch != epoch or self._closed, timeout)
            return self._epoch, self._at, self._current()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def _enter(self) -> None:
        with self._cond:
            self._watchers += 1

    def _leave(self) -> None:
        with self._cond:
            self._watchers -= 1
