/*
 * sanity.p4 (TNA) -- what the parser marked malformed -> drop reason, as
 * p4src/include/control/sanity.p4 does on v1model. Comparisons between two
 * fields are written as the sign bit of their difference, which a gateway tests
 * against a constant.
 *
 * Not on Tofino: "frame shorter than total length" (DROP_TOTAL_LEN's second
 * case): ingress has no packet length. Such a frame is counted and forwarded with
 * the length its header claims (p4src/README.md, Tofino differences).
 */
#ifndef __SANITY_TNA__
#define __SANITY_TNA__

control Sanity(inout headers_t hdr,
               inout ingress_metadata_t meta,
               in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {

    /* Tofino runs one ALU operation per field per action: the lengths are computed in one
     * step and compared in the next (two hidden tables, two stages). */
    action lengths() {
        meta.ihl_bytes = ((bit<16>)meta.ihl) << 2;
        meta.opt_end = (bit<16>)meta.other_9e_len + IPV4_MIN_HEADER_BYTES;
    }

    action slacks() {
        meta.len_slack = (bit<32>)hdr.ipv4.total_len - (bit<32>)meta.ihl_bytes;
        meta.opt_slack = meta.ihl_bytes - meta.opt_end;
    }

    @hidden table t_lengths {
        actions = { lengths; }
        const default_action = lengths();
        size = 1;
    }

    @hidden table t_slacks {
        actions = { slacks; }
        const default_action = slacks();
        size = 1;
    }

    apply {
        t_lengths.apply();
        t_slacks.apply();
        if (ig_prsr_md.parser_err != PARSER_ERROR_OK) {
            if ((ig_prsr_md.parser_err & PARSER_ERROR_PARTIAL_HDR) != 0) {
                meta.drop_reason = DROP_TRUNCATED;
            } else {
                meta.drop_reason = DROP_PARSER_OTHER;
            }
        } else if (meta.other_9e == 1
                   && (meta.other_9e_len < IPV4_OPT_MIN_LEN || meta.opt_slack[15:15] == 1)) {
            meta.drop_reason = DROP_OPT_LEN;   /* type 0x9e, length < 2 or past the options */
        } else if (meta.drop_reason == DROP_NONE) {
            if (meta.len_slack[31:31] == 1) {
                meta.drop_reason = DROP_TOTAL_LEN;
            } else if (hdr.ipv4.ttl <= 1) {
                meta.drop_reason = DROP_TTL;
            }
        }
    }
}

#endif
