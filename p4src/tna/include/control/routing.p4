/*
 * routing.p4 (TNA) -- IPv4 LPM with ECMP through an ActionSelector (open-p4studio
 * p4_16_programs/tna_action_selector), with v1model's per-switch hash window
 * (p4src/include/control/routing.p4: ECMP polarization).
 *
 * The 5-tuple (ports 0 for fragments and non-TCP/UDP) is hashed once with CRC-32 into 32
 * bits, and the selector's only key is a 16-bit window of it, (bit<16>)(hash >> shift),
 * shift the controller's per-switch-layer value in ecmp_window (0, 8 or 16): different
 * windows are different linear functions of the 5-tuple, so the layers of a fat-tree choose
 * independently (a seed would not do: a CRC is affine, a seed only XORs a constant).
 *
 * Tofino shifts by a constant only, so the shift picks one of a few constant-slice actions
 * (bf-p4c compiles each into one `set` of the ECMP key from the 32-bit hash's container):
 * - t_flow_hash, beside ecmp_window (stage 0): flow_hash = CRC-32 of the 5-tuple, one
 *   hash distribution output into a 32-bit container;
 * - t_ecmp_key, a constant exact table on the shift (stage 1): window_<shift> sets ecmp_key =
 *   flow_hash[shift+15:shift] for shift 0, 8, 16 (24: the top byte, as v1model's cast);
 *   any other shift leaves ecmp_key 0 (v1model's value for shift >= 32; a shift that is not
 *   a multiple of 8 is a difference: p4src/README.md, the controller writes none);
 * - routing_v4 (stage 2): the selector hashes ecmp_key with IDENTITY: its hash bits are the
 *   window's bits (Intel's switch.p4 feeds its ECMP and LAG selectors the halves of one
 *   CRC the same way, Hash<bit<16>>(HashAlgorithm_t.IDENTITY)).
 * Slicing the hash extern's output in t_ecmp_key's actions instead (no 32-bit field) does
 * not compile: each action's slice is a separate hash distribution output, 48 bits through
 * a table's 32-bit immediate path; a default action takes none.
 * Routing's lookup thus waits two steps (the window table, then the window): the main
 * apply keeps routing's miss off the owner register's chain (coflow_tna.p4).
 */
#ifndef __ROUTING_TNA__
#define __ROUTING_TNA__

control Routing(inout headers_t hdr,
                inout ingress_metadata_t meta,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    /* zlib's CRC-32, as v1model's HashAlgorithm.crc32 */
    Hash<bit<32>>(HashAlgorithm_t.CRC32) flow_hash;
    Hash<bit<TNA_ECMP_HASH_BITS>>(HashAlgorithm_t.IDENTITY) ecmp_hash;
    /* P4Runtime names the action profile after the ActionProfile instance: it carries the
     * v1model selector's name, ecmp_selector (the controller's name on both targets) */
    ActionProfile(ECMP_SELECTOR_SIZE) ecmp_selector;
    ActionSelector(ecmp_selector, ecmp_hash, SelectorMode_t.FAIR,
                   TNA_ECMP_MAX_GROUP_SIZE, TNA_ECMP_GROUPS) ecmp_select;

    action set_ecmp_window(bit<8> shift) {
        meta.ecmp_shift = shift;
    }

    /* Keyless: the controller writes the default action, shift in {0, 8, 16}. */
    table ecmp_window {
        actions = { set_ecmp_window; }
        default_action = set_ecmp_window(0);
        size = 1;
    }

    /* The 5-tuple's CRC-32, into the PHV once (beside ecmp_window, in its stage) */
    action get_flow_hash() {
        meta.flow_hash = flow_hash.get({hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                                        meta.l4_sport, meta.l4_dport});
    }

    @hidden table t_flow_hash {
        actions = { get_flow_hash; }
        const default_action = get_flow_hash();
        size = 1;
    }

    /* The window (bit<16>)(flow_hash >> shift), one constant slice per shift */
    action window_0() {
        meta.ecmp_key = meta.flow_hash[15:0];
    }
    action window_8() {
        meta.ecmp_key = meta.flow_hash[23:8];
    }
    action window_16() {
        meta.ecmp_key = meta.flow_hash[31:16];
    }
    action window_24() {
        meta.ecmp_key = (bit<16>)meta.flow_hash[31:24];
    }
    /* shift >= 32, as v1model: nothing left of the hash (ecmp_key stays 0) */
    action window_none() {
        meta.ecmp_key = 0;
    }

    @hidden table t_ecmp_key {
        key = { meta.ecmp_shift: exact; }
        actions = { window_0; window_8; window_16; window_24; window_none; }
        const entries = {
            0 : window_0();
            8 : window_8();
            16 : window_16();
            24 : window_24();
        }
        const default_action = window_none();
        size = 4;
    }

    /* port: translated for P4Runtime (tna_port_t, metadata.p4) */
    action set_next_hop(tna_port_t port, mac_addr_t smac, mac_addr_t dmac) {
        ig_tm_md.ucast_egress_port = (PortId_t)port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
    }

    table routing_v4 {
        key = {
            hdr.ipv4.dst_addr: lpm @name("ipv4_dst");
            meta.ecmp_key: selector;
        }
        actions = { set_next_hop; }
        implementation = ecmp_select;
        size = ROUTING_TABLE_SIZE;
    }

    apply {
        ecmp_window.apply();
        t_flow_hash.apply();
        t_ecmp_key.apply();
        /* its own bit, not drop_reason: routing then does not wait for sanity's drop
         * decision (the main apply turns a miss into DropReason_t.NO_ROUTE) */
        if (!routing_v4.apply().hit) {
            meta.route_miss = 1;
        }
    }
}

#endif
