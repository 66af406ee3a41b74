/*
 * ecn_marker.p4 -- ECN marking on a queue's depth, so that TCP backs off before the queue
 * overflows (RFC 3168: a CE mark halves the sender's window as a loss would, without the
 * loss, the retransmission or the timeout). This is how datacenters keep loss low when many
 * flows share a port: DCTCP marks at a fixed depth K.
 *
 * v1model: the queues that fill are not BMv2's (they drain at once) but the traffic manager's
 * behind the port (the emulation's HTB on the egress veth, at the link rate), which the
 * pipeline cannot see. So each queue of a port (port ++ priority, as the per-queue counters)
 * keeps a virtual queue (HULL's phantom queue): a byte level that every frame leaving through
 * that queue raises by its length and that drains at the port's rate. A queue is marked on its
 * own backlog, as a switch marks per queue (and as the TNA program does with the real depth):
 * with one class the level is the real queue's backlog as long as the real queue drops
 * nothing; with strict priorities a lower queue drains slower than the port's rate while a
 * higher one is busy, so its level underestimates its backlog (it is marked later, and its
 * leaf's limit drops what TCP does not slow down for), and a queue is never marked for the
 * backlog of another. A frame is marked when its queue's level exceeds the port's threshold and
 * it is ECN-capable (ECT(0) or ECT(1)); other frames are never marked (drop-tail behind them,
 * in the traffic manager).
 *
 * Units: the level is bytes << VQ_SHIFT; ``drain`` is the port's rate in (bytes << VQ_SHIFT)
 * per microsecond (rate_bps * 2^VQ_SHIFT / 8e6: 128 at 1 Mb/s, 1,280,000 at 10 Gb/s), so
 * that rates far below a byte per microsecond drain exactly. A port without an entry is
 * never marked. On Tofino the traffic manager's real depth is known: see p4src/tna.
 */
#ifndef __ECN_MARKER__
#define __ECN_MARKER__

#define VQ_SHIFT 10
typedef bit<32> vq_level_t;    /* bytes << VQ_SHIFT: up to 4 MiB of queue */
typedef bit<32> vq_time_t;     /* egress timestamp, microseconds mod 2^32 (71 min) */

control EcnMarker(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t std_meta) {

    register<vq_level_t>(QUEUE_COUNTER_SIZE) vq_level;    /* index: port ++ priority */
    register<vq_time_t>(QUEUE_COUNTER_SIZE) vq_time;
    counter(MAX_PORTS, CounterType.packets) ecn_marked;

    vq_level_t drain = 0;
    vq_level_t threshold = 0;

    action set_vq(vq_level_t drain_per_us, vq_level_t threshold_level) {
        drain = drain_per_us;
        threshold = threshold_level;
    }

    table ecn_port {
        key = { std_meta.egress_port: exact @name("egress_port"); }
        actions = { set_vq; @defaultonly NoAction; }
        const default_action = NoAction;
        size = ECN_PORT_TABLE_SIZE;
    }

    apply {
        if (ecn_port.apply().hit) {
            bit<32> port = (bit<32>)std_meta.egress_port;
            bit<32> queue = (bit<32>)(std_meta.egress_port ++ std_meta.priority);
            vq_level_t level;
            vq_time_t last;
            vq_level.read(level, queue);
            vq_time.read(last, queue);
            vq_time_t now = std_meta.egress_global_timestamp[31:0];
            /* elapsed * drain in 64 bits: a port idle for seconds at 100 Gb/s drains far
             * more than the 32-bit level could hold */
            bit<64> drained = (bit<64>)(now - last) * (bit<64>)drain;
            if (drained >= (bit<64>)level) {
                level = 0;
            } else {
                level = level - (vq_level_t)drained;
            }
            level = level |+| ((vq_level_t)std_meta.packet_length << VQ_SHIFT);
            vq_level.write(queue, level);
            vq_time.write(queue, now);
            /* ECT(0) or ECT(1); a frame marked upstream stays CE and is counted there */
            if (hdr.ipv4.isValid() && hdr.ipv4.ecn != ECN_NOT_ECT && hdr.ipv4.ecn != ECN_CE
                    && level > threshold) {
                hdr.ipv4.ecn = ECN_CE;
                ecn_marked.count(port);
            }
        }
    }
}

#endif
