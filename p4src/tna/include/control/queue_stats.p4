/*
 * queue_stats.p4 (TNA) -- the operator's counters, as on v1model
 * (p4src/include/control/queue_stats.p4), index egress port * 8 + class:
 *  - queue_enq  (ingress, stamp.p4): packets handed to the traffic manager;
 *  - queue_drop (ingress): packets the pipeline dropped for that queue (meter RED);
 *  - queue_deq  (egress): packets that left, by the class bridged from ingress
 *    (egress_qid is the physical queue, which the TM maps per port).
 * drop_reasons counts every pipeline drop by DropReason_t; drop_ctl drops.
 * Byte counts are the frame as the MAC counts it (with its FCS, as every TNA counter here; the
 * controller takes the FCS out: Target.fcs_bytes). Egress receives the bridged header in front
 * of the frame and would count it too: queue_deq takes it out with Counter.count's
 * adjust_byte_count (a constant, subtracted), as bf-p4c's own v1model translation does for every
 * egress counter and meter (p4c backends/tofino/bf-p4c/arch/v1model.cpp, AddAdjustByteCount;
 * the constant rule: mau/adjust_byte_count.cpp, AdjustByteCountSetup::Scan).
 */
#ifndef __QUEUE_STATS_TNA__
#define __QUEUE_STATS_TNA__

control IngressQueueStats(inout headers_t hdr,
                          inout ingress_metadata_t meta,
                          inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    Counter<bit<32>, bit<8>>(DROP_REASONS, CounterType_t.PACKETS) drop_reasons;
    Counter<bit<64>, queue_idx_t>(QUEUE_COUNTER_SIZE, CounterType_t.PACKETS_AND_BYTES) queue_drop;

    apply {
        if (meta.drop_reason != DropReason_t.NONE) {
            drop_reasons.count((bit<8>)meta.drop_reason);
            if (meta.drop_reason == DropReason_t.METER_RED) {
                queue_drop.count(meta.queue_idx);
            }
            ig_dprsr_md.drop_ctl = TNA_DROP_CTL;
        }
    }
}

control EgressQueueStats(inout egress_metadata_t meta,
                         in egress_intrinsic_metadata_t eg_intr_md) {

    Counter<bit<64>, queue_idx_t>(QUEUE_COUNTER_SIZE, CounterType_t.PACKETS_AND_BYTES) queue_deq;

    apply {
        meta.queue_idx = (queue_idx_t)(eg_intr_md.egress_port ++ meta.bridged.prio);
        queue_deq.count(meta.queue_idx, meta.bridged.minSizeInBytes());
    }
}

#endif
