/*
 * report.p4 -- threshold crossings pushed to the controller (issue 29): a digest when a
 * coordinated coflow's byte counter (coflow_counter.p4's coflow_bytes_reg) crosses a
 * report boundary of its slot.
 *
 * The controller writes one report_step entry per assigned slot (REPORT_TABLE_SIZE): a mask
 * ~(step - 1) for a power-of-two step. The boundaries are the multiples of the step; the
 * packet that moves the counter across one (bytes before and after it differ above the
 * step's bit) sends one digest {slot, CoflowId, bytes after the packet}; the packets before and after
 * it, inside one step, send none. No entry (a hashed slot, or a mode without reports): no
 * digest. Why boundaries of a fixed step and not a threshold the controller moves up after
 * each digest: p4src/README.md, "Threshold crossings (digests)".
 */
#ifndef __REPORT__
#define __REPORT__

struct report_digest_t {
    bit<32>      slot;         /* the counter slot (meta.slot) */
    coflow_ext_t external_id;  /* the packet's CoflowId: the controller drops a digest */
    coflow_int_t internal_id;  /* of a slot's previous coflow (slot re-assigned since) */
    bytes_t      bytes;        /* the slot's bytes after the crossing packet */
}

control Report(inout headers_t hdr,
               inout local_metadata_t meta,
               inout standard_metadata_t std_meta) {

    action set_step(bytes_t mask) {
        meta.report_mask = mask;
    }

    table report_step {
        key = { meta.slot: exact @name("slot"); }
        actions = { set_step; @defaultonly NoAction; }
        const default_action = NoAction();
        size = REPORT_TABLE_SIZE;
    }

    apply {
        if (report_step.apply().hit) {
            bytes_t after = meta.bytes_before + (bytes_t)std_meta.packet_length;
            if (((meta.bytes_before ^ after) & meta.report_mask) != 0) {
                digest<report_digest_t>(REPORT_DIGEST_RECEIVER, {meta.slot, hdr.coflow_opt.external_id,
                                                                  hdr.coflow_opt.internal_id, after});
            }
        }
    }
}

#endif
