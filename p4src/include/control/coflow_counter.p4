/*
 * coflow_counter.p4 -- per-coflow byte counters at the edge.
 *
 * A CoflowId maps to a slot: the controller assigns slots 0..ASSIGNED_SLOTS-1
 * through the exact table coflow_slot; an unknown coflow falls back to
 * HASH_SLOT_BASE + the top HASH_SLOT_BITS bits of ext*HASH_MUL_EXT + int*HASH_MUL_INT
 * (Fibonacci hashing; a CRC is linear over GF(2) and maps grids of
 * consecutive ids onto few slots). packet.hash_slot() computes the same.
 *
 * Bytes live in a register (the data plane compares them with thresholds) and
 * are mirrored into the indexed counter coflow_bytes, which P4Runtime reads
 * (BMv2/PI does not serve register reads, PI#376).
 *
 * Each slot remembers its owner tag {1, ext, int} (0 = free) and the epoch of
 * the owner's last packet (coflow_seen_reg). The epoch is the ingress timestamp
 * >> EPOCH_SHIFT (about a second), modulo 2^EPOCH_BITS: slots age in the data
 * plane, no controller needed. A packet whose tag differs from the owner:
 *  - takes the slot over (owner := tag, bytes restart at 0) when the slot is
 *    free, when it is an assigned slot (the controller re-assigned it; it also
 *    zeroes the mirror counter over P4Runtime), or when it is a hashed slot
 *    whose owner has been idle for at least meta.slot_idle_epochs epochs
 *    ((epoch - seen) mod 2^EPOCH_BITS >= idle: idle more than idle - 1 epochs).
 *    A takeover from a previous owner is counted in slot_takeovers[slot];
 *  - otherwise (a hashed slot whose owner is active) it is a collision: the
 *    packet is counted in slot_collisions[slot], the two coflows share the
 *    slot's bytes, and the owner's last-seen epoch is left alone (only the
 *    owner's own packets keep a slot busy).
 *
 * Everything happens inside the coflow_slot table's action: on BMv2 every
 * straight-line block of a control becomes a table of its own, and table
 * applies dominate its per-packet cost, so the owner check is written with
 * ?: expressions. slot_collisions[COFLOW_SLOTS] and slot_takeovers[COFLOW_SLOTS]
 * count the packets that did neither (discard indices; ignore them).
 */
#ifndef __COFLOW_COUNTER__
#define __COFLOW_COUNTER__

control CoflowCounter(inout headers_t hdr,
                      inout local_metadata_t meta,
                      inout standard_metadata_t std_meta) {

    register<bytes_t>(COFLOW_SLOTS) coflow_bytes_reg;
    register<coflow_tag_t>(COFLOW_SLOTS) coflow_owner_reg;
    register<epoch_t>(COFLOW_SLOTS) coflow_seen_reg;
    counter(COFLOW_SLOTS, CounterType.packets_and_bytes) coflow_bytes;
    counter(COFLOW_SLOTS + 1, CounterType.packets) slot_collisions;
    counter(COFLOW_SLOTS + 1, CounterType.packets) slot_takeovers;

    action count_slot() {
        meta.tag = 8w1 ++ hdr.coflow_opt.external_id ++ hdr.coflow_opt.internal_id;
        meta.epoch = (epoch_t)(std_meta.ingress_global_timestamp >> EPOCH_SHIFT);
        coflow_owner_reg.read(meta.slot_owner, meta.slot);
        coflow_seen_reg.read(meta.slot_seen, meta.slot);
        coflow_bytes_reg.read(meta.bytes_before, meta.slot);
        bool other = meta.slot_owner != meta.tag;
        bool idle = meta.epoch - meta.slot_seen >= meta.slot_idle_epochs;
        bool take = other && (meta.slot_assigned == 1 || meta.slot_owner == 0 || idle);
        bool collide = other && !take;
        bool reclaim = take && meta.slot_owner != 0;
        meta.bytes_before = take ? (bytes_t)0 : meta.bytes_before;
        coflow_owner_reg.write(meta.slot, take ? meta.tag : meta.slot_owner);
        coflow_seen_reg.write(meta.slot, collide ? meta.slot_seen : meta.epoch);
        coflow_bytes_reg.write(meta.slot, meta.bytes_before + (bytes_t)std_meta.packet_length);
        coflow_bytes.count(meta.slot);
        slot_collisions.count(collide ? meta.slot : (bit<32>)COFLOW_SLOTS);
        slot_takeovers.count(reclaim ? meta.slot : (bit<32>)COFLOW_SLOTS);
    }

    action set_slot(bit<32> slot) {
        meta.slot = slot;
        meta.slot_assigned = 1;
        count_slot();
    }

    action hash_slot() {
        bit<32> mix = hdr.coflow_opt.external_id * HASH_MUL_EXT
                      + ((bit<32>)hdr.coflow_opt.internal_id) * HASH_MUL_INT;
        meta.slot = HASH_SLOT_BASE + (mix >> (32 - HASH_SLOT_BITS));
        meta.slot_assigned = 0;
        count_slot();
    }

    table coflow_slot {
        key = {
            hdr.coflow_opt.external_id: exact @name("external_id");
            hdr.coflow_opt.internal_id: exact @name("internal_id");
        }
        actions = { set_slot; @defaultonly hash_slot; }
        const default_action = hash_slot();
        size = COFLOW_SLOT_TABLE_SIZE;
    }

    apply {
        coflow_slot.apply();
    }
}

#endif
