/*
 * ecn_marker.p4 (TNA) -- ECN marking on the queue's depth, v1model's ecn_marker.p4 on
 * Tofino. The same table, action and counter (one P4Info for the controller); the depth is
 * the traffic manager's own (eg_intr_md.enq_qdepth, in 80-byte cells on Tofino 1) instead of
 * v1model's virtual queue, so set_vq's drain_per_us is not used. The depth is converted to
 * v1model's unit, bytes << VQ_SHIFT (cells * 80 * 1024 = (cells << 16) + (cells << 14)), so
 * that threshold_level means the same on both targets.
 */
#ifndef __ECN_MARKER_TNA__
#define __ECN_MARKER_TNA__

control EcnMarker(inout egress_headers_t hdr,
                  inout egress_metadata_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md) {

    Counter<bit<32>, PortId_t>(MAX_PORTS, CounterType_t.PACKETS) ecn_marked;

    action set_vq(bit<32> drain_per_us, bit<32> threshold_level) {
        meta.ecn_on = 1;
        meta.ecn_threshold = threshold_level;
    }

    table ecn_port {
        key = { eg_intr_md.egress_port: exact @name("egress_port"); }
        actions = { set_vq; @defaultonly NoAction; }
        const default_action = NoAction;
        size = ECN_PORT_TABLE_SIZE;
    }

    apply {
        meta.ecn_on = 0;
        meta.ecn_mark = 0;
        ecn_port.apply();
        /* one operation per step: each is an action of its own stage */
        meta.ecn_depth = (bit<32>)eg_intr_md.enq_qdepth;
        meta.ecn_lo = meta.ecn_depth << 14;
        meta.ecn_depth = meta.ecn_depth << 16;
        meta.ecn_depth = meta.ecn_depth + meta.ecn_lo;
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
