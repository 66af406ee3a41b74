/*
 * queue_stats.p4 -- the counters an operator needs, all read over P4Runtime.
 *
 * Index of the per-queue counters: egress port * 8 + priority (port ++ prio).
 *  - queue_enq  (ingress, declared in stamp.p4): packets handed to the traffic manager;
 *  - queue_drop (ingress): packets the pipeline dropped for that queue (meter RED);
 *  - queue_deq  (egress):  packets that left the queue.
 * queue_enq - queue_deq is what BMv2's own queues dropped (P4 cannot see
 * those drops); drop_reasons counts every pipeline drop by DROP_* reason.
 */
#ifndef __QUEUE_STATS__
#define __QUEUE_STATS__

control IngressQueueStats(inout headers_t hdr,
                          inout local_metadata_t meta,
                          inout standard_metadata_t std_meta) {

    counter(DROP_REASONS, CounterType.packets) drop_reasons;
    counter(QUEUE_COUNTER_SIZE, CounterType.packets_and_bytes) queue_drop;

    apply {
        if (meta.drop_reason != DROP_NONE) {
            drop_reasons.count((bit<32>)meta.drop_reason);
            if (meta.drop_reason == DROP_METER_RED) {
                queue_drop.count((bit<32>)(std_meta.egress_spec ++ meta.prio));
            }
            mark_to_drop(std_meta);
        }
    }
}

control EgressQueueStats(inout headers_t hdr,
                         inout local_metadata_t meta,
                         inout standard_metadata_t std_meta) {

    counter(QUEUE_COUNTER_SIZE, CounterType.packets_and_bytes) queue_deq;

    apply {
        queue_deq.count((bit<32>)(std_meta.egress_port ++ meta.prio));
    }
}

#endif
