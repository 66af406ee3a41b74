/*
 * routing.p4 -- IPv4 LPM with ECMP through an action selector.
 *
 * Entries point to action-profile members (one next hop) or groups (ECMP).
 * The selector hashes the 5-tuple (ports are 0 for fragments and non-TCP/UDP),
 * so one flow always takes one path and keeps its packet order. crc32, not
 * crc16: BMv2's crc16 (CRC-16/ARC) is linear, and for flows that differ only
 * in their L4 ports its bit 1 stayed constant, leaving half of a 4-way group
 * unused (measured in the ECMP PTF test).
 *
 * Per-switch hash window (ECMP polarization). Every switch runs this program,
 * so every switch computes the same hash of a flow; with equal group sizes a
 * fat-tree's aggregation switch then takes the same member index as the edge
 * below it did, and only the "diagonal" paths are used (k = 4: cores c0 and c3
 * carry every cross-pod flow, c1 and c2 nothing; measured, tests/
 * test_ctl_live_ecmp.py). A seed does not help a CRC: it is affine, so a seed
 * only XORs a constant into the hash and flips whole switches' choices. So the
 * 5-tuple is hashed once into 32 bits and each switch feeds the selector a
 * different 16-bit window of it (ecmp_window, written by the controller per
 * switch layer): different windows are different linear functions of the
 * 5-tuple, so the layers' choices are independent of each other.
 */
#ifndef __ROUTING__
#define __ROUTING__

control Routing(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t std_meta) {

    action_selector(HashAlgorithm.crc32, ECMP_SELECTOR_SIZE, ECMP_HASH_WIDTH) ecmp_selector;

    action set_ecmp_window(bit<8> shift) {
        meta.ecmp_shift = shift;
    }

    /* Keyless: the controller writes the default action, shift in {0, 8, 16}. */
    table ecmp_window {
        actions = { set_ecmp_window; }
        default_action = set_ecmp_window(0);
        size = 1;
    }

    action set_next_hop(port_t port, mac_addr_t smac, mac_addr_t dmac) {
        std_meta.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
    }

    table routing_v4 {
        key = {
            hdr.ipv4.dst_addr: lpm @name("ipv4_dst");
            meta.ecmp_key: selector;
        }
        actions = { set_next_hop; }
        implementation = ecmp_selector;
        size = ROUTING_TABLE_SIZE;
    }

    apply {
        ecmp_window.apply();
        hash(meta.flow_hash, HashAlgorithm.crc32, 32w0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_sport, meta.l4_dport }, 33w0x100000000);
        meta.ecmp_key = (bit<16>)(meta.flow_hash >> meta.ecmp_shift);
        if (!routing_v4.apply().hit) {
            meta.drop_reason = DropReason_t.NO_ROUTE;
        }
    }
}

#endif
