/*
 * flow_meter.p4 -- indirect meters per (coflow, src, dst) flow at the sender's
 * edge, applied in Mode_t.RATE (Varys / HUG rate control). The controller gives
 * each flow of a rate-controlled coflow a meter index of its own from a pool of
 * FLOW_METERS (a free list per edge switch, released when the flow finishes or
 * its coflow unregisters) and pushes a MeterConfig (bytes per second, P4Runtime
 * units) computed by MADD or HUG, scaled from payload to frame bytes. A meter
 * only colours: RED packets are dropped here and counted per meter
 * (meter_red_drops) and per queue; GREEN and YELLOW ones pass and are counted
 * per meter in flow_bytes (frame bytes and packets), which the controller reads
 * every round as the flow's progress (frame bytes - packets * overhead =
 * payload bytes; p4src/README.md "Meters"). A YELLOW packet that is ECN-capable
 * leaves marked CE (counted per meter in meter_marked, apart from the ports'
 * queue marks): with cir = pir and a peak burst larger than the committed one
 * (the controller's meter_mark_bursts), a TCP sender above its rate is told by a
 * mark before the peak bucket runs dry and drops; with pburst = cburst (the
 * default) nothing is YELLOW.
 */
#ifndef __FLOW_METER__
#define __FLOW_METER__

control FlowMeter(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t std_meta) {

    meter(FLOW_METERS, MeterType.bytes) flow_meters;
    counter(FLOW_METERS, CounterType.packets_and_bytes) meter_red_drops;
    counter(FLOW_METERS, CounterType.packets_and_bytes) flow_bytes;  /* passed the meter */
    counter(FLOW_METERS, CounterType.packets) meter_marked;          /* YELLOW, marked CE */

    action set_meter(bit<32> index) {
        meta.meter_idx = index;
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
        size = FLOW_METER_TABLE_SIZE;
    }

    apply {
        if (flow_meter.apply().hit) {
            flow_meters.execute_meter(meta.meter_idx, meta.color);
            if (meta.color == METER_RED) {
                meter_red_drops.count(meta.meter_idx);
                meta.drop_reason = DropReason_t.METER_RED;
            } else {
                if (meta.color == METER_YELLOW && hdr.ipv4.ecn != ECN_NOT_ECT) {
                    hdr.ipv4.ecn = ECN_CE;
                    meter_marked.count(meta.meter_idx);
                }
                flow_bytes.count(meta.meter_idx);
            }
        }
    }
}

#endif
