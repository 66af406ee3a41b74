/*
 * queue_stats.p4 -- the counters an operator needs, all read over P4Runtime.
 *
 * Index of the per-queue counters: egress port * 8 + priority (port ++ prio).
 *  - queue_enq  (ingress, declared in stamp.p4): packets handed to the traffic manager;
 *  - queue_drop (ingress): packets the pipeline dropped for that queue (meter RED);
 *  - queue_deq  (egress):  packets that left the queue, indexed by the queue BMv2 used
 *                          (standard_metadata.priority as egress sees it), so a misqueued
 *                          packet is visible.
 * queue_enq - queue_deq is what BMv2's own queues dropped (P4 cannot see
 * those drops); drop_reasons counts every pipeline drop by DropReason_t.
 */
#ifndef __QUEUE_STATS__
#define __QUEUE_STATS__

control IngressQueueStats(inout headers_t hdr,
                          inout local_metadata_t meta,
                          inout standard_metadata_t std_meta) {

    counter(DROP_REASONS, CounterType.packets) drop_reasons;
    counter(QUEUE_COUNTER_SIZE, CounterType.packets_and_bytes) queue_drop;

    apply {
        if (meta.drop_reason != DropReason_t.NONE) {
            drop_reasons.count((bit<32>)(bit<8>)meta.drop_reason);
            if (meta.drop_reason == DropReason_t.METER_RED) {
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

    /* Indexed by the queue the traffic manager put the packet in, not by the ingress
     * decision in meta.prio: simple_switch --priority-queues enqueues a packet in the queue
     * standard_metadata.priority names and egress sees that same value (this p4c's v1model.p4
     * does not declare qid, the dequeue queue BMv2 would otherwise report). A packet the
     * pipeline handed to the wrong queue shows up in the wrong index. */
    apply {
        queue_deq.count((bit<32>)(std_meta.egress_port ++ std_meta.priority));
    }
}

#endif
