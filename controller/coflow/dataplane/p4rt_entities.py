"""The P4Runtime client's entity builders, a part of :class:`coflow.dataplane.p4rt.P4RuntimeClient`:
actions, table entries (exact, LPM, ternary, range, optional matches), action-profile members
and groups, counter and meter entities, built by name from the loaded P4Info.
"""
from __future__ import annotations

from typing import Any, Iterable

from .p4info import P4InfoHelper, encode_value


def _pb():
    from coflow.dataplane.pb import p4runtime_pb2, p4runtime_pb2_grpc
    return p4runtime_pb2, p4runtime_pb2_grpc


class EntityBuilders:
    p4info: P4InfoHelper | None     # the client's (P4RuntimeClient.load_p4info)

    def _helper(self) -> P4InfoHelper:
        if self.p4info is None:
            raise RuntimeError("no P4Info loaded")
        return self.p4info

    def action(self, name: str, params: dict[str, Any] | None = None):
        pb, _ = _pb()
        h = self._helper()
        act = pb.Action()
        act.action_id = h.action_id(name)
        for pname, value in (params or {}).items():
            p = h.action_param(name, pname)
            ap = act.params.add()
            ap.param_id = p.id
            ap.value = encode_value(value, p.bitwidth)
        return act

    def _field_matches(self, table: str, match: dict[str, Any]) -> list:
        pb, _ = _pb()
        from coflow.dataplane.pb import p4info_pb2 as info
        h = self._helper()
        out = []
        for fname, value in (match or {}).items():
            mf = h.match_field(table, fname)
            bw = mf.bitwidth
            fm = pb.FieldMatch()
            fm.field_id = mf.id
            mt = mf.match_type
            if mt == info.MatchField.EXACT:
                fm.exact.value = encode_value(value, bw)
            elif mt == info.MatchField.LPM:
                addr, plen = value
                if plen == 0:
                    continue  # don't-care: omitted
                fm.lpm.value = encode_value(addr, bw)
                fm.lpm.prefix_len = plen
            elif mt == info.MatchField.TERNARY:
                val, mask = value
                if encode_value(mask, bw) == b"\x00":
                    continue  # don't-care: omitted
                fm.ternary.value = encode_value(val, bw)
                fm.ternary.mask = encode_value(mask, bw)
            elif mt == info.MatchField.RANGE:
                lo, hi = value
                if lo == 0 and hi == (1 << bw) - 1:
                    continue  # full range = don't-care: omitted
                fm.range.low = encode_value(lo, bw)
                fm.range.high = encode_value(hi, bw)
            elif mt == info.MatchField.OPTIONAL:
                if value is None:
                    continue
                fm.optional.value = encode_value(value, bw)
            else:
                raise ValueError(f"unsupported match type {mt} for {fname}")
            out.append(fm)
        return out

    def table_entry(self, table: str, match: dict[str, Any] | None = None,
                    action: str | None = None, params: dict[str, Any] | None = None,
                    priority: int = 0, member_id: int | None = None,
                    group_id: int | None = None, default: bool = False):
        """An Entity holding a TableEntry. Use ``default=True`` (and no match) for the default
        action; ``member_id`` / ``group_id`` for tables with an action profile / selector."""
        pb, _ = _pb()
        h = self._helper()
        ent = pb.Entity()
        te = ent.table_entry
        te.table_id = h.table_id(table)
        if default:
            te.is_default_action = True
        te.match.extend(self._field_matches(table, match or {}))
        if priority:
            te.priority = priority
        if action is not None:
            te.action.action.CopyFrom(self.action(action, params))
        elif member_id is not None:
            te.action.action_profile_member_id = member_id
        elif group_id is not None:
            te.action.action_profile_group_id = group_id
        return ent

    def member(self, profile: str, member_id: int, action: str, params: dict[str, Any] | None = None):
        pb, _ = _pb()
        ent = pb.Entity()
        m = ent.action_profile_member
        m.action_profile_id = self._helper().get_id("action_profiles", profile)
        m.member_id = member_id
        m.action.CopyFrom(self.action(action, params))
        return ent

    def group(self, profile: str, group_id: int, member_ids: Iterable[int], max_size: int = 0):
        pb, _ = _pb()
        ent = pb.Entity()
        g = ent.action_profile_group
        g.action_profile_id = self._helper().get_id("action_profiles", profile)
        g.group_id = group_id
        for mid in member_ids:
            mm = g.members.add()
            mm.member_id = mid
            mm.weight = 1
        if max_size:
            g.max_size = max_size
        return ent

    def counter_entity(self, counter: str, index: int | None = None):
        pb, _ = _pb()
        ent = pb.Entity()
        ent.counter_entry.counter_id = self._helper().get_id("counters", counter)
        if index is not None:
            ent.counter_entry.index.index = index
        return ent

    def meter_entity(self, meter: str, index: int, cir: int | None = None, cburst: int = 0,
                     pir: int | None = None, pburst: int = 0):
        """MeterEntry; rates in units per **second** (bytes/s for a bytes meter), bursts in
        units. ``cir=None`` leaves the config unset (reset to all-GREEN where supported)."""
        pb, _ = _pb()
        ent = pb.Entity()
        me = ent.meter_entry
        me.meter_id = self._helper().get_id("meters", meter)
        me.index.index = index
        if cir is not None:
            me.config.cir = cir
            me.config.cburst = cburst
            me.config.pir = cir if pir is None else pir
            me.config.pburst = pburst or cburst
        return ent
