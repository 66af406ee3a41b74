/*
 * ecn_marker.p4 (TNA) -- ECN marking on the queue's depth, v1model's ecn_marker.p4 on
 * Tofino. The same table, action and counter (one P4Info for the controller); the depth is
 * the traffic manager's own (eg_intr_md.enq_qdepth, 19 bits of 80-byte cells on Tofino 1)
 * instead of v1model's virtual queue, so set_vq's drain_per_us is not used, and the threshold
 * is in cells (the controller converts: coflow.tofino.target.Target.ecn_threshold_param). A
 * depth in bytes << 10 would need 19 + 17 bits and wrapped at 4.2 MB in 32 (issue 28).
 * Marking rewrites ECN only: the checksum update's two inputs are computed here (the one's
 * complement of the old checksum, the codepoint's increase) and summed in the deparser.
 */
#ifndef __ECN_MARKER_TNA__
#define __ECN_MARKER_TNA__

control EcnMarker(inout egress_headers_t hdr,
                  inout egress_metadata_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md) {

    Counter<bit<32>, PortId_t>(MAX_PORTS, CounterType_t.PACKETS) ecn_marked;

    /* threshold_level: cells on Tofino (bytes << VQ_SHIFT on v1model) */
    action set_vq(bit<32> drain_per_us, bit<32> threshold_level) {
        meta.ecn_on = 1;
        meta.ecn_threshold = threshold_level;
    }

    table ecn_port {
        key = { meta.eg_port: exact @name("egress_port"); }
        actions = { set_vq; @defaultonly NoAction; }
        const default_action = NoAction;
        size = ECN_PORT_TABLE_SIZE;
    }

    apply {
        meta.ecn_on = 0;
        meta.ecn_mark = 0;
        ecn_port.apply();
        meta.ecn_depth = (bit<32>)eg_intr_md.enq_qdepth;
        meta.ck_inv = ~hdr.ipv4.hdr_checksum;
        /* ECT(0) = 0b10 -> CE = 0b11: +1; ECT(1) = 0b01 -> CE: +2 (used only when marking) */
        if (hdr.ipv4.ecn == ECN_ECT0) {
            meta.ecn_delta = 1;
        } else {
            meta.ecn_delta = 2;
        }
        /* depth > threshold, as a saturating difference (one comparison of equal widths) */
        meta.ecn_depth = meta.ecn_depth |-| meta.ecn_threshold;
        if (meta.ecn_on == 1 && hdr.ipv4.isValid() && hdr.ipv4.ecn != ECN_NOT_ECT
                && hdr.ipv4.ecn != ECN_CE && meta.ecn_depth != 0) {
            hdr.ipv4.ecn = ECN_CE;
            meta.ecn_mark = 1;
            ecn_marked.count(eg_intr_md.egress_port);
        }
    }
}

#endif
