"""Desired state kept incrementally: per switch, the union of disjoint components (static
routing/config, coflow slots, overrides, flow_meter entries, meter configs), each replaced as a
whole or patched by known keys, with the set of keys that changed since the switch's last
successful sync.

A round then costs what changed, not what the switch holds: the controller diffs only the dirty
keys against the switch's cached actual state (:func:`coflow.ctl.model.diff_keys`), which equals
the full :func:`~coflow.ctl.model.diff` of a rebuilt state as long as the cache reflects the last
sync (the switch agent tracks that; after a reconnect, an audit or a failed write it falls back
to the full diff). ``tests/test_ctl_incremental.py`` checks the equality on random histories of
coflow arrivals, demotions, rate changes and departures.

Components are disjoint by construction (each owns its tables or entity kinds); a key claimed by
two components is an error, as a conflicting duplicate is for :class:`~coflow.ctl.model.SwitchState`.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from . import model as M


class DesiredBook:
    def __init__(self, switches: Iterable[str]):
        self.states: dict[str, M.SwitchState] = {sw: M.SwitchState() for sw in switches}
        self.dirty: dict[str, set] = {sw: set() for sw in self.states}
        self._keys: dict = {}  # (component, switch) -> set of keys it holds there
        self._last: dict = {}  # (component, switch) -> the mapping given last (identity skip)

    def set(self, comp: str, sw: str, new: Mapping, changed: Iterable | None = None) -> int:
        """Component ``comp`` of switch ``sw`` is now ``new`` (key -> entity); returns how many
        keys changed. Without ``changed`` every key is compared (new, modified, gone) and the
        mapping must not be mutated afterwards (the same object again is skipped at once).
        With ``changed``: the caller guarantees that only those keys may differ from the
        previous call (added, modified, or removed: absent from ``new``); only they are read
        from ``new``, which may be a mapping the caller updates in place between calls, or
        just the changed entries."""
        ident = (comp, sw)
        want = self.states[sw].entities
        dirty = self.dirty[sw]
        n = 0
        if changed is not None:
            self._last[ident] = None
            keys = self._keys.get(ident)
            if keys is None:
                keys = self._keys[ident] = set()
            for k in changed:
                v = new.get(k)
                o = want.get(k)
                if v is None:
                    if k in keys:
                        keys.discard(k)
                        del want[k]
                        dirty.add(k)
                        n += 1
                    continue
                if o is None:
                    keys.add(k)
                elif k not in keys:
                    raise ValueError(f"{sw}: key {k} claimed by component {comp!r} and another one")
                elif o is v or o == v:
                    continue
                want[k] = v
                dirty.add(k)
                n += 1
            return n
        if self._last.get(ident) is new:
            return 0
        old = self._keys.get(ident)
        if old is None:
            old = self._keys[ident] = set()
        for k, v in new.items():
            o = want.get(k)
            if o is v:
                continue
            if o is None:
                if k in old:  # pragma: no cover - want and _keys move together
                    raise AssertionError(k)
                old.add(k)
            elif k not in old:
                raise ValueError(f"{sw}: key {k} claimed by component {comp!r} and another one")
            elif o == v:
                continue
            want[k] = v
            dirty.add(k)
            n += 1
        if len(old) != len(new):
            for k in [k for k in old if k not in new]:
                old.discard(k)
                del want[k]
                dirty.add(k)
                n += 1
        self._last[ident] = new
        return n

    def set_many(self, comp: str, switches, new: Mapping) -> int:
        """:meth:`set` of the same mapping on several switches (coflow slots and rate-mode
        overrides are the same on every edge): when they all hold the same previous mapping,
        the two are compared once and only the difference is applied to each switch."""
        switches = list(switches)
        lasts = {id(self._last.get((comp, sw))) for sw in switches}
        prev = self._last.get((comp, switches[0])) if switches else None
        if len(lasts) != 1 or prev is None or not isinstance(prev, dict):
            return sum(self.set(comp, sw, new) for sw in switches)
        if prev is new:
            return 0
        changed = [k for k, v in new.items() if (o := prev.get(k)) is not v and o != v]
        gone = [k for k in prev if k not in new]
        n = 0
        for sw in switches:
            ident = (comp, sw)
            want = self.states[sw].entities
            dirty = self.dirty[sw]
            keys = self._keys[ident]
            for k in changed:
                if k not in keys:
                    if k in want:
                        raise ValueError(f"{sw}: key {k} claimed by component {comp!r} and another one")
                    keys.add(k)
                want[k] = new[k]
                dirty.add(k)
            for k in gone:
                keys.discard(k)
                del want[k]
                dirty.add(k)
            self._last[ident] = new
            n += len(changed) + len(gone)
        return n

    def state(self, sw: str) -> M.SwitchState:
        """The switch's desired state (the live object: read it, do not keep a copy)."""
        return self.states[sw]

    def synced(self, sw: str, keys: Iterable | None = None) -> None:
        """The switch now holds its desired state (``keys``: only those were written)."""
        if keys is None:
            self.dirty[sw].clear()
        else:
            self.dirty[sw].difference_update(keys)
