/*
 * report.p4 (TNA) -- threshold crossings pushed to the controller, the v1model control
 * (p4src/include/control/report.p4) with TNA's Digest extern: ingress marks the packet
 * (ig_dprsr_md.digest_type = TNA_REPORT_DIGEST_TYPE) and the ingress deparser packs
 * {slot, CoflowId, units after the packet} (parser.p4, CoflowIngressDeparser; the pattern of
 * open-p4studio's p4_16_programs/tna_digest and bf-p4c's tofino1_base.p4 Digest).
 *
 * Counts are the byte register's 64-byte units (coflow_counter.p4), so the controller's
 * step is a power-of-two number of units and report_step's mask ~(step - 1) is in units.
 * The crossing test is the v1model one, ((before ^ after) & mask) != 0. `after` comes from a
 * stateful ALU of its own: a shadow of coflow_bytes_reg for slots 0..TNA_REPORT_TABLE_SIZE - 1
 * (the only ones report_step can name), added to and restarted exactly as the byte register
 * is, which returns the count after the packet. The shadow is updated for every counted packet
 * of those slots, whether report_step has an entry for the slot or not, so it always equals
 * the byte register after the packet: the controller may write coflow_slot and report_step in
 * any order, or give a slot in use a step later (a mode switched to digests), and a slot's
 * first report is right. (Updated only on a report_step hit, as before, the shadow missed the
 * restart of a slot whose coflow_slot entry came before its report_step entry, and every packet
 * of that coflow then sent a digest with a count off by the old one.) Computing `after` as
 * bytes_before + len_units in the MAU instead (a 16-bit length widened into a 32-bit sum) makes
 * bf-p4c's PHV allocation fail ("Unable to slice ... meta.len_units, meta.report_after,
 * meta.bytes_before ..."), and would put the sum a stage after the byte register.
 * Then xor and and, one ALU operation per action (an action cannot span stages), and a
 * gateway. No register the controller writes: the step is a table entry.
 */
#ifndef __REPORT_TNA__
#define __REPORT_TNA__

/* report_digest_t: metadata.p4 (the deparser in parser.p4 packs it) */

control Report(inout headers_t hdr,
               inout ingress_metadata_t meta,
               inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    action set_step(tna_units_t mask) {
        meta.report_mask = mask;
        meta.report_on = 1;
    }

    table report_step {
        key = { meta.slot: exact @name("slot"); }
        actions = { set_step; @defaultonly NoAction; }
        const default_action = NoAction();
        size = TNA_REPORT_TABLE_SIZE;
    }

    /* the counts after each packet of slots 0..TNA_REPORT_TABLE_SIZE - 1 (only they can have
     * report_step entries), whether they report now or not: the byte register's shadow */
    Register<tna_units_t, tna_slot_t>(TNA_REPORT_TABLE_SIZE, 0) report_units_reg;

    RegisterAction<tna_units_t, tna_slot_t, tna_units_t>(report_units_reg) units_add = {
        void apply(inout tna_units_t units, out tna_units_t after) {
            units = units |+| (tna_units_t)meta.len_units;
            after = units;
        }
    };

    RegisterAction<tna_units_t, tna_slot_t, tna_units_t>(report_units_reg) units_restart = {
        void apply(inout tna_units_t units, out tna_units_t after) {
            units = (tna_units_t)meta.len_units;
            after = units;
        }
    };

    /* one ALU operation per action, each a table of its own (they depend on each other,
     * and an action cannot span stages) */
    action xor_after() {
        meta.report_cross = meta.bytes_before ^ meta.report_after;
    }
    action and_mask() {
        meta.report_cross = meta.report_cross & meta.report_mask;
    }
    action mark() {
        ig_dprsr_md.digest_type = TNA_REPORT_DIGEST_TYPE;
    }
    @hidden table t_xor { actions = { xor_after; } const default_action = xor_after(); size = 1; }
    @hidden table t_mask { actions = { and_mask; } const default_action = and_mask(); size = 1; }
    @hidden table t_mark { actions = { mark; } const default_action = mark(); size = 1; }

    apply {
        /* the lookup whenever tagged (placed early); the test once the count is known */
        if (hdr.coflow_opt.isValid()) {
            report_step.apply();
        }
        /* the shadow follows coflow_bytes_reg for every counted packet of a slot below
         * TNA_REPORT_TABLE_SIZE (its index; a higher slot would alias one of them), report
         * entry or not; the crossing test needs the entry */
        if (meta.decide == 1 && meta.route_miss == 0 && meta.slot_assigned == 1
            && meta.slot[TNA_SLOT_BITS - 1:TNA_REPORT_SLOT_BITS] == 0) {
            if (meta.slot_restart == 1) {
                meta.report_after = units_restart.execute(meta.slot);
            } else {
                meta.report_after = units_add.execute(meta.slot);
            }
            if (meta.report_on == 1) {
                t_xor.apply();
                t_mask.apply();
                if (meta.report_cross != 0) {
                    t_mark.apply();
                }
            }
        }
    }
}

#endif
