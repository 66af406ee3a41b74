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

    /* Two actions, because an action that writes part of a container may draw on one PHV
     * source besides the container itself, or on a constant and one PHV field, not on
     * more: the class goes into DSCP[5:3] (the container keeps its other bits), the constants
     * (DSCP[2:0] = 0) in the other action; and the option's the same way, in actions of their
     * own applied only to a tagged packet. An untagged packet's coflow_opt is not valid, and
     * bf-p4c may overlay an invalid header's containers with fields the packet does carry
     * (mutually exclusive headers share PHV containers; the ones the parser extracts are
     * valid): a write into it could change bytes that are emitted, or that the deparser's
     * checksum sums. */
    action stamp_class() {
        hdr.ipv4.dscp[5:3] = meta.prio;
        ig_tm_md.qid = (QueueId_t)meta.prio;
        ig_tm_md.ingress_cos = meta.prio;
        meta.bridged.prio = meta.prio;
    }

    action stamp_marks() {
        hdr.ipv4.dscp[2:0] = 0;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action stamp_opt_class() {
        hdr.coflow_opt.prio = meta.prio;
    }

    action stamp_opt_marks() {
        hdr.coflow_opt.stamped = 1;
    }

    @hidden table t_stamp_class {
        actions = { stamp_class; }
        const default_action = stamp_class();
        size = 1;
    }

    @hidden table t_stamp_marks {
        actions = { stamp_marks; }
        const default_action = stamp_marks();
        size = 1;
    }

    @hidden table t_stamp_opt_class {
        actions = { stamp_opt_class; }
        const default_action = stamp_opt_class();
        size = 1;
    }

    @hidden table t_stamp_opt_marks {
        actions = { stamp_opt_marks; }
        const default_action = stamp_opt_marks();
        size = 1;
    }

    apply {
        t_stamp_class.apply();
        t_stamp_marks.apply();
        if (hdr.coflow_opt.isValid()) {
            t_stamp_opt_class.apply();
            t_stamp_opt_marks.apply();
        }
        /* applied to every packet (a dropped one is not emitted): only the count waits */
        if (meta.drop_reason == DropReason_t.NONE) {
            queue_enq.count(meta.queue_idx);
        }
    }
}

#endif
