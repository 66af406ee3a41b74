/*
 * routing.p4 -- IPv4 LPM with ECMP through an action selector.
 *
 * Entries point to action-profile members (one next hop) or groups (ECMP).
 * The selector hashes the 5-tuple (ports are 0 for fragments and non-TCP/UDP),
 * so one flow always takes one path and keeps its packet order. crc32, not
 * crc16: BMv2's crc16 (CRC-16/ARC) is linear, and for flows that differ only
 * in their L4 ports its bit 1 stayed constant, leaving half of a 4-way group
 * unused (measured in the ECMP PTF test).
 */
#ifndef __ROUTING__
#define __ROUTING__

control Routing(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t std_meta) {

    action_selector(HashAlgorithm.crc32, ECMP_SELECTOR_SIZE, ECMP_HASH_WIDTH) ecmp_selector;

    action set_next_hop(port_t port, mac_addr_t smac, mac_addr_t dmac) {
        std_meta.egress_spec = port;
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
        implementation = ecmp_selector;
        size = ROUTING_TABLE_SIZE;
    }

    apply {
        if (!routing_v4.apply().hit) {
            meta.drop_reason = DropReason_t.NO_ROUTE;
        }
    }
}

#endif
