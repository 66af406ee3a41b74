/*
 * routing.p4 (TNA) -- IPv4 LPM with ECMP through an ActionSelector (open-p4studio
 * p4_16_programs/tna_action_selector). The selector's hash is CRC-32 over the same
 * 5-tuple as v1model (ports 0 for fragments and non-TCP/UDP), its low
 * TNA_ECMP_HASH_BITS bits used: a flow keeps one path.
 */
#ifndef __ROUTING_TNA__
#define __ROUTING_TNA__

control Routing(inout headers_t hdr,
                inout ingress_metadata_t meta,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Hash<bit<TNA_ECMP_HASH_BITS>>(HashAlgorithm_t.CRC32) ecmp_hash;
    /* P4Runtime names the action profile after the ActionProfile instance: it carries the
     * v1model selector's name, ecmp_selector (the controller's name on both targets) */
    ActionProfile(ECMP_SELECTOR_SIZE) ecmp_selector;
    ActionSelector(ecmp_selector, ecmp_hash, SelectorMode_t.FAIR,
                   TNA_ECMP_MAX_GROUP_SIZE, TNA_ECMP_GROUPS) ecmp_select;

    /* port: translated for P4Runtime (tna_port_t, metadata.p4) */
    action set_next_hop(tna_port_t port, mac_addr_t smac, mac_addr_t dmac) {
        ig_tm_md.ucast_egress_port = (PortId_t)port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
    }

    table routing_v4 {
        key = {
            hdr.ipv4.dst_addr: lpm @name("ipv4_dst");
            hdr.ipv4.src_addr: selector;
            hdr.ipv4.dst_addr: selector;
            hdr.ipv4.protocol: selector;
            meta.l4_sport: selector;
            meta.l4_dport: selector;
        }
        actions = { set_next_hop; }
        implementation = ecmp_select;
        size = ROUTING_TABLE_SIZE;
    }

    apply {
        /* its own bit, not drop_reason: routing then runs beside sanity, not after it
         * (the main apply turns a miss into DropReason_t.NO_ROUTE) */
        if (!routing_v4.apply().hit) {
            meta.route_miss = 1;
        }
    }
}

#endif
