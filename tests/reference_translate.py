"""Test oracles for the meter translation (issue 29): :func:`coflow.ctl.translate.meter_config`
and :meth:`coflow.ctl.translate.MeterContext.update` as they were before the translation computed
a round's changed meters in one vector pass (:func:`~coflow.ctl.translate.meter_params`) and
rewrote only the meters whose config changed. The property tests check that the package's code
gives the same configs and the same desired state; bench-scale's ``scalarcfg`` variant runs the
controller on :class:`MeterContextReference` (the change alone, same run). They live here, not
in the package, so that the controller computes every meter one way."""
from __future__ import annotations

import math

import numpy as np

from coflow.ctl import model as M
from coflow.ctl.translate import (CtlSettings, MAX_FRAME_BYTES, MeterContext, MeterUpdate,
                                  PACING_FREE_SEGMENTS, TCP_MSS_BYTES)


def meter_config_reference(index: int, rate_Bps: float, s: CtlSettings, fcs_bytes: int = 0) -> M.MeterConfig:
    """The scalar meter_config, step by step in Python."""
    floor = s.min_rate_frac * s.link_Bps
    frame = float(rate_Bps) * (MAX_FRAME_BYTES + fcs_bytes) / TCP_MSS_BYTES
    rate = max(frame, floor, 1.0) * (1.0 + s.meter_headroom)
    cir = int(math.ceil(rate - 1e-6))
    hi = int(s.port_buffer_bytes * s.burst_buffer_frac)
    burst = min(max(int(math.ceil(cir * s.rtt_us / 1e6)), 2 * (MAX_FRAME_BYTES + fcs_bytes)), hi)
    peak = max(burst, min(int(burst * s.meter_peak_bursts), s.port_buffer_bytes))
    if s.meter_headroom > 0 and s.meter_peak_bursts > 1:
        peak = max(peak, min(PACING_FREE_SEGMENTS * MAX_FRAME_BYTES, s.port_buffer_bytes))
    return M.MeterConfig(M.M_FLOW, index, cir, burst, cir, peak)


class MeterContextReference(MeterContext):
    """:class:`MeterContext` with the per-meter update it replaced: every meter whose rate
    moved gets a new config (:func:`meter_config_reference`, one at a time) and a patch, whether
    or not its config changed (the book then compares it with the old one)."""

    def update(self, cids: list, cf, src, dst, rate, slots=None, s: CtlSettings | None = None) -> MeterUpdate:
        if s is None:
            s = CtlSettings()
        self.pool.commit()
        cf = np.asarray(cf, dtype=np.int64)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        rate = np.asarray(rate, dtype=float)
        retry = self.pool.generation if self.unmetered else -1
        key = (tuple(cids), cf.tobytes(), src.tobytes(), dst.tobytes(), retry)
        sets: list = []
        glob = self._glob
        if self._settings != s:
            self._settings = s
            glob = None
            for cm in self._cf.values():
                cm.mrate = None
            self._mrate = None
        if glob is None or glob[0] != key:
            glob = self._global(key, cids, cf, src, dst, sets)
        _, sel, inv, minv, npairs, nmeters, members, moffs = glob
        r = rate if sel is None else rate[sel]
        prate = np.bincount(inv, weights=r, minlength=npairs)
        mrate = np.bincount(minv, weights=prate, minlength=nmeters)
        if glob is self._glob and self._mrate is not None:
            prev = self._mrate
        else:
            prev = np.full(nmeters, np.nan)
            for _, cm in members:
                if cm.mrate is not None:
                    prev[cm.moff:cm.moff + cm.nmeters] = cm.mrate
        ch = np.flatnonzero(mrate != prev)
        patches: list = []
        if ch.size:
            mr = mrate.tolist()
            owner = np.searchsorted(moffs, ch, side="right") - 1
            by: dict = {}
            fresh: set = set()
            for i, k in zip(ch.tolist(), owner.tolist()):
                cid, cm = members[k]
                if cm.meters is None or k in fresh:
                    if k not in fresh:
                        fresh.add(k)
                        meters: dict = {}
                        for j in range(cm.nmeters):
                            m = meter_config_reference(cm.m_index[j], mr[cm.moff + j], s, self.fcs_bytes)
                            meters.setdefault(cm.m_sw[j], {})[m.key] = m
                        cm.meters = meters
                        sets.extend((("meters", cid), sw, meters[sw]) for sw in sorted(meters))
                    continue
                j = i - cm.moff
                m = meter_config_reference(cm.m_index[j], mr[i], s, self.fcs_bytes)
                cm.meters[cm.m_sw[j]][m.key] = m
                by.setdefault((cid, cm.m_sw[j]), (cm, []))[1].append(m.key)
            patches = [(("meters", cid), sw, cm.meters[sw], ks) for (cid, sw), (cm, ks) in by.items()]
        for _, cm in members:
            cm.mrate = mrate[cm.moff:cm.moff + cm.nmeters]
            cm.mpar = None     # (the package's update recomputes its configs' record)
        self._glob = glob
        self._mrate = mrate
        self._mpar = None
        return MeterUpdate(sets, patches, *self._linger())
