/*
 * coflow_counter.p4 (TNA) -- per-coflow byte counters at the edge, the v1model
 * control (p4src/include/control/coflow_counter.p4) in stateful ALUs.
 *
 * Slot: the controller assigns slots 0..TNA_ASSIGNED_SLOTS-1 through the exact
 * table coflow_slot; an unknown coflow hashes to TNA_HASH_SLOT_BASE + the low
 * TNA_HASH_SLOT_BITS bits of CRC-32 (the zlib one) over {external_id, internal_id}.
 * Tofino has no multiplier, so v1model's Fibonacci hash becomes a Hash extern
 * (open-p4studio p4_16_programs/tna_custom_hash); coflow.tofino.target.hash_slot()
 * computes the same slot.
 *
 * Each slot is a register pair and a register (stateful ALU words):
 *  - coflow_owner_reg {owner, expire}: the owner tag {1, CRC-32C(ext, int)[30:0]}
 *    (0 = free: 31 bits of a second, independent hash; two coflows in one slot
 *    whose tags are equal, 1 in 2^31, go unnoticed and share the slot's bytes) and
 *    the clock at which the slot turns idle: its owner's last packet's clock
 *    (meta.epoch: 2^30-ns units, config.p4) + SLOT_IDLE_EPOCHS, compared with the
 *    clock in serial-number arithmetic (p4src/include/slot_clock.p4);
 *  - coflow_bytes_reg: bytes in 2^TNA_BYTES_UNIT_SHIFT-byte units, each packet's
 *    frame length (IPv4 total length, at most TNA_MAX_COUNTED_IP_LEN, + 14) rounded
 *    to the nearest unit (at most half a unit off per packet), saturating at
 *    2^32 - 1 units (256 GiB).
 * The slot lifecycle is v1model's: an assigned slot with another owner is taken
 * over (bytes restart at 0); a hashed slot is taken over when free or idle for
 * SLOT_IDLE_EPOCHS epochs of 2^30 ns, and otherwise another coflow collides:
 * counted in slot_collisions[slot], the coflows share its bytes, and only the
 * owner's packets keep the slot busy.
 *
 * coflow_bytes (Counter, read over P4Runtime) counts exact bytes per assigned
 * slot, the ones the controller reads (v1model counts packets too, for every
 * slot: 64k packets-and-bytes entries do not fit one stage's memories beside
 * the rest); the registers are what the data plane compares with thresholds.
 */
#ifndef __COFLOW_COUNTER_TNA__
#define __COFLOW_COUNTER_TNA__

/* CRC-32 as zlib computes it: polynomial 0x04C11DB7, reflected, init and final
 * xor 0xFFFFFFFF (open-p4studio tna_custom_hash's "crc32"). */
#define TNA_SLOT_CRC_POLY 0x04C11DB7
/* CRC-32C (Castagnoli), reflected, init and final xor 0xFFFFFFFF: the tag hash. */
#define TNA_TAG_CRC_POLY 0x1EDC6F41
#define TNA_CRC_INIT 0xFFFFFFFF
#define TNA_CRC_XOR 0xFFFFFFFF

control CoflowCounter(inout headers_t hdr,
                      inout ingress_metadata_t meta) {

    CRCPolynomial<bit<32>>(TNA_SLOT_CRC_POLY, true, false, false, TNA_CRC_INIT, TNA_CRC_XOR) slot_poly;
    Hash<bit<TNA_HASH_SLOT_BITS>>(HashAlgorithm_t.CUSTOM, slot_poly) slot_hash;  /* low bits */
    CRCPolynomial<bit<32>>(TNA_TAG_CRC_POLY, true, false, false, TNA_CRC_INIT, TNA_CRC_XOR) tag_poly;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, tag_poly) tag_hash;   /* CRC-32C; bit 31 is then set */

    Register<slot_state_t, tna_slot_t>(TNA_COFLOW_SLOTS, {0, 0}) coflow_owner_reg;
    Register<tna_units_t, tna_slot_t>(TNA_COFLOW_SLOTS, 0) coflow_bytes_reg;
    /* the controller reads the slots it assigned; bytes only (two per SRAM word) */
    Counter<bit<64>, tna_slot_t>(TNA_ASSIGNED_SLOTS, CounterType_t.BYTES) coflow_bytes;
    Counter<bit<32>, tna_slot_t>(TNA_COFLOW_SLOTS, CounterType_t.PACKETS) slot_collisions;
    Counter<bit<32>, tna_slot_t>(TNA_COFLOW_SLOTS, CounterType_t.PACKETS) slot_takeovers;

    /* assigned slot: the packet's coflow owns it from now on. out: slot_outcome_t.SAME (its
     * owner), slot_outcome_t.CLAIM (was free) or slot_outcome_t.TAKE (another coflow's, which the
     * controller re-assigned). Both register actions return the enum (one output kind
     * per register). */
    RegisterAction<slot_state_t, tna_slot_t, slot_outcome_t>(coflow_owner_reg) owner_claim = {
        void apply(inout slot_state_t s, out slot_outcome_t outcome) {
            if (s.owner == meta.tag) {
                outcome = slot_outcome_t.SAME;
            } else if (s.owner == 0) {
                outcome = slot_outcome_t.CLAIM;
            } else {
                outcome = slot_outcome_t.TAKE;
            }
            s.owner = meta.tag;
            s.expire = SLOT_CLOCK_EXPIRE(meta.epoch, (bit<32>)SLOT_IDLE_EPOCHS);
        }
    };

    /* hashed slot: the owner's packet refreshes it; a free or idle slot (last seen at least
     * SLOT_IDLE_EPOCHS clock units ago in serial-number arithmetic, SLOT_CLOCK_IDLE in
     * p4src/include/slot_clock.p4; a free slot expires at 0, so it is idle while the clock is
     * at most 2^31 units, 73 years) is taken; anything else collides and changes
     * nothing. The span is a constant: a stateful
     * ALU takes two PHV inputs (the tag and the clock), so the controller's slot_idle_epochs
     * does not reach it. Two conditions, what one stateful ALU has. out: which case, an
     * enum, which bf-p4c returns as the ALU's predicate (the only way one stateful ALU
     * tells more than one bit about its conditions). */
    RegisterAction<slot_state_t, tna_slot_t, slot_outcome_t>(coflow_owner_reg) owner_probe = {
        void apply(inout slot_state_t s, out slot_outcome_t outcome) {
            if (s.owner == meta.tag) {
                s.expire = SLOT_CLOCK_EXPIRE(meta.epoch, (bit<32>)SLOT_IDLE_EPOCHS);
                outcome = slot_outcome_t.SAME;
            } else if (SLOT_CLOCK_IDLE(meta.epoch, s.expire)) {
                s.owner = meta.tag;
                s.expire = SLOT_CLOCK_EXPIRE(meta.epoch, (bit<32>)SLOT_IDLE_EPOCHS);
                outcome = slot_outcome_t.TAKE;
            } else {
                outcome = slot_outcome_t.COLLIDE;
            }
        }
    };

    RegisterAction<tna_units_t, tna_slot_t, tna_units_t>(coflow_bytes_reg) bytes_add = {
        void apply(inout tna_units_t units, out tna_units_t before) {
            before = units;
            units = units |+| (tna_units_t)meta.len_units;
        }
    };

    RegisterAction<tna_units_t, tna_slot_t, tna_units_t>(coflow_bytes_reg) bytes_restart = {
        void apply(inout tna_units_t units) {
            units = (tna_units_t)meta.len_units;
        }
    };

    /* Both actions also turn the frame bytes (computed before the table, in a stage of
     * their own) into 64-byte units: one ALU operation per field per action. */
    action set_slot(tna_slot_t slot) {
        meta.slot = slot;
        meta.slot_assigned = 1;
        meta.tag[31:31] = 1;     /* never 0, which marks a free slot */
        meta.len_units = meta.frame_bytes >> TNA_BYTES_UNIT_SHIFT;
    }

    /* the hashed slot, computed before the table (a default action cannot use the hash
     * unit): meta.slot holds the hash; its top bit is TNA_HASH_SLOT_BASE (set here: a
     * constant beside a hash in one action crashes this bf-p4c) */
    action hash_slot() {
        meta.slot[TNA_SLOT_BITS - 1:TNA_HASH_SLOT_BITS] = 1;
        meta.slot_assigned = 0;
        meta.tag[31:31] = 1;
        meta.len_units = meta.frame_bytes >> TNA_BYTES_UNIT_SHIFT;
    }

    table coflow_slot {
        key = {
            hdr.coflow_opt.external_id: exact @name("external_id");
            hdr.coflow_opt.internal_id: exact @name("internal_id");
        }
        actions = { set_slot; @defaultonly hash_slot; }
        const default_action = hash_slot();
        size = TNA_ASSIGNED_SLOTS;
    }

    /* One hash per action: an action takes at most 32 bits from the hash units
     * (the immediate path), and the two hashes are 15 + 32. The hashed slot is
     * TNA_HASH_SLOT_BASE + the hash: the base is 2^TNA_HASH_SLOT_BITS, the top bit of the
     * slot index, set by hash_slot; set_slot overwrites it all when the controller
     * assigned a slot. */
    action get_slot_hash() {
        meta.slot[TNA_HASH_SLOT_BITS - 1:0] =
            slot_hash.get({hdr.coflow_opt.external_id, hdr.coflow_opt.internal_id});
    }

    @hidden table t_slot_hash {
        actions = { get_slot_hash; }
        const default_action = get_slot_hash();
        size = 1;
    }

    action get_tag() {
        meta.tag = tag_hash.get({hdr.coflow_opt.external_id, hdr.coflow_opt.internal_id});
    }

    @hidden table t_tag {
        actions = { get_tag; }
        const default_action = get_tag();
        size = 1;
    }

    apply {
        /* lookups whenever tagged (placed early), state changes only if decide */
        if (hdr.coflow_opt.isValid()) {
            t_slot_hash.apply();
            t_tag.apply();
            meta.frame_bytes = meta.ip_len
                               + (ETH_HEADER_BYTES + (1 << (TNA_BYTES_UNIT_SHIFT - 1)));
            coflow_slot.apply();
        }
        if (meta.decide == 1 && meta.route_miss == 0) {
            slot_outcome_t outcome;
            if (meta.slot_assigned == 1) {
                outcome = owner_claim.execute(meta.slot);
            } else {
                outcome = owner_probe.execute(meta.slot);
            }
            if (outcome == slot_outcome_t.SAME) {
                meta.bytes_before = bytes_add.execute(meta.slot);
            } else if (outcome == slot_outcome_t.COLLIDE) {
                meta.bytes_before = bytes_add.execute(meta.slot);   /* collision: shared */
                slot_collisions.count(meta.slot);
            } else {
                bytes_restart.execute(meta.slot);     /* taken or claimed: restart at 0 */
                meta.slot_restart = 1;                /* report.p4's shadow count too */
                meta.bytes_before = 0;
                if (outcome == slot_outcome_t.TAKE) {
                    slot_takeovers.count(meta.slot);
                }
            }
            if (meta.slot_assigned == 1) {
                coflow_bytes.count(meta.slot);
            }
        }
    }
}

#endif
