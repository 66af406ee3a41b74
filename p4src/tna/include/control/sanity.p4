/*
 * sanity.p4 (TNA) -- what the parser marked malformed -> drop reason, as
 * p4src/include/control/sanity.p4 does on v1model. Comparisons between two
 * fields are written as the sign bit of their difference, which a gateway tests
 * against a constant.
 *
 * Not on Tofino: "frame shorter than total length" (DropReason_t.TOTAL_LEN's second
 * case): ingress has no packet length. Such a frame is forwarded, and counted in the
 * byte registers with the length its header claims, at most TNA_MAX_COUNTED_IP_LEN
 * (meta.ip_len, set here): a small frame claiming 65,535 bytes counts as an MTU-sized
 * one (p4src/README.md, "What a host can gain by lying").
 */
#ifndef __SANITY_TNA__
#define __SANITY_TNA__

control Sanity(inout headers_t hdr,
               inout ingress_metadata_t meta,
               in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {

    /* Per IHL, IHL * 4 and one more than IHL * 4 - 20 (the bytes of options there is
     * room for) as action data, each the first operand of one saturating subtract (the
     * ALU takes action data as the first operand only). The parser rejects IHL < 5. */
    action set_ihl(bit<16> ihl_bytes, bit<8> opt_room_1) {
        meta.len_short = ihl_bytes |-| hdr.ipv4.total_len;   /* > 0: total_len < IHL*4 */
        meta.opt_fit = opt_room_1 |-| meta.other_9e_len;     /* 0: len > room, past the options */
        meta.ip_len = min(hdr.ipv4.total_len, (bit<16>)TNA_MAX_COUNTED_IP_LEN);
    }

    @hidden table t_ihl {
        key = { meta.ihl: exact; }
        actions = { set_ihl; }
        const entries = {
            5 : set_ihl(20, 1);
            6 : set_ihl(24, 5);
            7 : set_ihl(28, 9);
            8 : set_ihl(32, 13);
            9 : set_ihl(36, 17);
            10 : set_ihl(40, 21);
            11 : set_ihl(44, 25);
            12 : set_ihl(48, 29);
            13 : set_ihl(52, 33);
            14 : set_ihl(56, 37);
            15 : set_ihl(60, 41);
        }
        const default_action = set_ihl(0, 1);
        size = 16;
    }

    apply {
        t_ihl.apply();
        if (ig_prsr_md.parser_err != PARSER_ERROR_OK) {
            if ((ig_prsr_md.parser_err & PARSER_ERROR_PARTIAL_HDR) != 0) {
                meta.drop_reason = DropReason_t.TRUNCATED;
            } else {
                meta.drop_reason = DropReason_t.PARSER_OTHER;
            }
        } else if (meta.other_9e == 1
                   && (meta.other_9e_len < IPV4_OPT_MIN_LEN || meta.opt_fit == 0)) {
            meta.drop_reason = DropReason_t.OPT_LEN;  /* 0x9e, length < 2 or past the options */
        } else if (meta.drop_reason == DropReason_t.NONE) {
            if (meta.len_short != 0) {
                meta.drop_reason = DropReason_t.TOTAL_LEN;
            } else if (hdr.ipv4.ttl <= 1) {
                meta.drop_reason = DropReason_t.TTL;
            }
        }
    }
}

#endif
