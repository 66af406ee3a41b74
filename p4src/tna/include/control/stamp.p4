/*
 * stamp.p4 (TNA) -- write the decision into the packet and hand it to the
 * traffic manager, as on v1model (p4src/include/control/stamp.p4): option stamp,
 * DSCP = priority << 3, TTL - 1; the queue is ig_tm_md.qid = the class (a port's
 * queues 0..7; which are strict and their weights is traffic-manager
 * configuration, coflow.tofino.tm), and ingress_cos the same. The class is
 * bridged to egress for the dequeue counter. The checksum is updated in the
 * deparser (parser.p4).
 */
#ifndef __STAMP_TNA__
#define __STAMP_TNA__

control Stamp(inout headers_t hdr,
              inout ingress_metadata_t meta,
              inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Counter<bit<64>, queue_idx_t>(QUEUE_COUNTER_SIZE, CounterType_t.PACKETS_AND_BYTES) queue_enq;

    apply {
        hdr.ipv4.dscp = meta.prio ++ 3w0;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        hdr.coflow_opt.stamped = 1;        /* untagged: the header stays invalid, not emitted */
        hdr.coflow_opt.prio = meta.prio;
        ig_tm_md.qid = (QueueId_t)meta.prio;
        ig_tm_md.ingress_cos = meta.prio;
        meta.bridged.prio = meta.prio;
        queue_enq.count(meta.queue_idx);
    }
}

#endif
