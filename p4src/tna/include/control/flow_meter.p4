/*
 * flow_meter.p4 (TNA) -- meters per (coflow, flow slot) at the sender's edge in
 * Mode_t.RATE, as on v1model (p4src/include/control/flow_meter.p4), with TNA's
 * Meter extern (open-p4studio p4_16_programs/tna_meter_lpf_wred): a bytes meter
 * whose colour is MeterColor_t (RED = 3 on TNA, 2 on v1model). RED packets are
 * dropped (drop_ctl, in queue_stats.p4) and counted per meter.
 * One meter per flow: the controller gives each (coflow, src, dst) an index of
 * its own from a pool per edge switch (0 .. TNA_FLOW_METERS - 1, as on v1model);
 * flow_bytes counts what passed, the controller's per-flow progress.
 */
#ifndef __FLOW_METER_TNA__
#define __FLOW_METER_TNA__

control FlowMeter(inout headers_t hdr,
                  inout ingress_metadata_t meta) {

    Meter<bit<32>>(TNA_FLOW_METERS, MeterType_t.BYTES) flow_meters;
    Counter<bit<64>, bit<32>>(TNA_FLOW_METERS, CounterType_t.PACKETS_AND_BYTES) meter_red_drops;
    /* what passed each meter (GREEN / YELLOW): the controller's per-flow progress */
    Counter<bit<64>, bit<32>>(TNA_FLOW_METERS, CounterType_t.PACKETS_AND_BYTES) flow_bytes;
    /* YELLOW packets marked CE (the meters' marks, apart from the ports' queue marks) */
    Counter<bit<32>, bit<32>>(TNA_FLOW_METERS, CounterType_t.PACKETS) meter_marked;

    action set_meter(bit<32> index) {
        meta.meter_idx = index;
        meta.color = flow_meters.execute(index);
    }

    table flow_meter {
        key = {
            hdr.coflow_opt.external_id: exact @name("external_id");
            hdr.coflow_opt.internal_id: exact @name("internal_id");
            hdr.ipv4.src_addr: exact @name("ipv4_src");
            hdr.ipv4.dst_addr: exact @name("ipv4_dst");
        }
        actions = { set_meter; @defaultonly NoAction; }
        const default_action = NoAction();
        size = TNA_FLOW_METERS;
    }

    apply {
        if (flow_meter.apply().hit) {
            if (meta.color == (bit<8>)MeterColor_t.RED) {
                meter_red_drops.count(meta.meter_idx);
                meta.meter_red = 1;          /* DropReason_t.METER_RED (coflow_tna.p4) */
            } else {
                /* YELLOW (past the committed burst, within the peak one): an ECN-capable
                 * packet is marked CE, as on v1model (the checksum's rewritten words
                 * include the ECN field) */
                if (meta.color == (bit<8>)MeterColor_t.YELLOW && hdr.ipv4.ecn != ECN_NOT_ECT) {
                    hdr.ipv4.ecn = ECN_CE;
                    meter_marked.count(meta.meter_idx);
                }
                flow_bytes.count(meta.meter_idx);
            }
        }
    }
}

#endif
