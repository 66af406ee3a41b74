/*
 * stamp.p4 -- write the decision into the packet so later hops need no
 * per-coflow state: the option's stamp byte (S=1, priority) for tagged
 * packets, and DSCP = priority << 3 (class selector CSp) for every packet,
 * which the emulated traffic manager (HTB + u32 on DSCP) classifies on.
 * Also decrements TTL. The IPv4 checksum is updated incrementally
 * (RFC 1624, eqn. 3) because it covers options the pipeline cannot list
 * field by field (an opaque varbit may follow the CoflowId option).
 */
#ifndef __STAMP__
#define __STAMP__

control Stamp(inout headers_t hdr,
              inout local_metadata_t meta,
              inout standard_metadata_t std_meta) {

    /* One straight-line block per case (each becomes a single BMv2 table). Only the
     * DSCP, TTL and stamp bytes change, so the checksum update needs just those words:
     * HC' = ~(~HC + ~m + m') summed over the changed 16-bit words m -> m'. */
    apply {
        bit<32> sum;
        if (hdr.coflow_opt.isValid()) {
            bit<16> old_w0 = hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn;
            bit<16> old_tp = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
            bit<16> old_o = hdr.coflow_opt.stamped ++ hdr.coflow_opt.rsvd
                            ++ hdr.coflow_opt.prio ++ hdr.coflow_opt.internal_id;
            hdr.ipv4.dscp = meta.prio ++ 3w0;
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            hdr.coflow_opt.stamped = 1;
            hdr.coflow_opt.prio = meta.prio;
            sum = (bit<32>)(~hdr.ipv4.hdr_checksum)
                + (bit<32>)(~old_w0) + (bit<32>)(hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn)
                + (bit<32>)(~old_tp) + (bit<32>)(hdr.ipv4.ttl ++ hdr.ipv4.protocol)
                + (bit<32>)(~old_o) + (bit<32>)(hdr.coflow_opt.stamped ++ hdr.coflow_opt.rsvd
                                                ++ hdr.coflow_opt.prio ++ hdr.coflow_opt.internal_id);
            sum = (sum & 0xffff) + (sum >> 16);
            sum = (sum & 0xffff) + (sum >> 16);
            hdr.ipv4.hdr_checksum = ~sum[15:0];
            std_meta.priority = meta.prio;
        } else {
            bit<16> old_w0 = hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn;
            bit<16> old_tp = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
            hdr.ipv4.dscp = meta.prio ++ 3w0;
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            sum = (bit<32>)(~hdr.ipv4.hdr_checksum)
                + (bit<32>)(~old_w0) + (bit<32>)(hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.dscp ++ hdr.ipv4.ecn)
                + (bit<32>)(~old_tp) + (bit<32>)(hdr.ipv4.ttl ++ hdr.ipv4.protocol);
            sum = (sum & 0xffff) + (sum >> 16);
            sum = (sum & 0xffff) + (sum >> 16);
            hdr.ipv4.hdr_checksum = ~sum[15:0];
            std_meta.priority = meta.prio;
        }
    }
}

#endif
