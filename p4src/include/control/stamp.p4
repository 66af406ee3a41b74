/*
 * stamp.p4 -- write the decision into the packet and hand it to the traffic
 * manager (standard_metadata.priority, queue_enq counter). Write it so later hops need no
 * per-coflow state: the option's stamp byte (S=1, priority) for tagged
 * packets, and DSCP = priority << 3 (class selector CSp) for every packet,
 * which the emulated traffic manager (HTB + u32 on DSCP) classifies on.
 * Also decrements TTL.
 */
#ifndef __STAMP__
#define __STAMP__

control Stamp(inout headers_t hdr,
              inout local_metadata_t meta,
              inout standard_metadata_t std_meta) {

    /* queue_enq (see queue_stats.p4) lives here so that stamping and handing the
     * packet to the traffic manager is one BMv2 table apply. */
    counter(QUEUE_COUNTER_SIZE, CounterType.packets_and_bytes) queue_enq;

    /* One straight-line block per case: each becomes a single BMv2 table. The
     * checksum is recomputed in CoflowComputeChecksum (parser.p4). */
    apply {
        hdr.ipv4.dscp = meta.prio ++ 3w0;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        hdr.coflow_opt.stamped = 1;        /* untagged: the header stays invalid, not emitted */
        hdr.coflow_opt.prio = meta.prio;
        std_meta.priority = meta.prio;
        /* indexed by what the traffic manager is handed, not by the decision */
        queue_enq.count((bit<32>)(std_meta.egress_spec ++ std_meta.priority));
    }
}

#endif
