/*
 * parser.p4 (TNA) -- the v1model parser's states (p4src/include/parser.p4) on
 * Tofino, the ingress and egress deparsers, and the IPv4 checksum.
 *
 * Malformed cases end in `accept` with meta.drop_reason set, or in a parser
 * error flag (ig_prsr_md.parser_err; reading it in ingress keeps the packet,
 * so the sanity control drops and counts it, as on v1model). Nothing loops.
 *
 * IPv4 checksum with options present: a Checksum over a varbit is not possible
 * on Tofino, and the pipeline rewrites only three 16-bit words (version/IHL/DSCP/
 * ECN, TTL/protocol, the option's stamp/internal id). The parser subtracts those
 * words and the old checksum from zero, which leaves the sum of every other word
 * (the residual, including any other options); the deparser adds the rewritten
 * words to it. The pattern of open-p4studio's p4_16_programs/tna_checksum. Two
 * residuals (the ingress parser's two checksum units): with and without the
 * CoflowId option's stamp word, since the residual is read where the last word
 * is subtracted.
 */
#ifndef __PARSER_TNA__
#define __PARSER_TNA__

parser CoflowIngressParser(packet_in pkt,
                           out headers_t hdr,
                           out ingress_metadata_t meta,
                           out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() residual_untagged;
    Checksum() residual_tagged;
    ParserCounter() opt_words;         /* 32-bit option words still to parse */

    /* intrinsic metadata, then the port metadata (open-p4studio common/util.p4) */
    state start {
        pkt.extract(ig_intr_md);
        meta.bridged.setValid();
        meta.bridged.prio = PRIO_LOWEST;
        meta.drop_reason = DropReason_t.NONE;
        meta.other_9e = 0;
        meta.other_9e_len = 0;
        meta.ck_tagged = 0;
        meta.route_miss = 0;
        meta.forward = 0;
        meta.decide = 0;
        meta.meter_red = 0;
        meta.l4_sport = 0;
        meta.l4_dport = 0;
        transition select(ig_intr_md.resubmit_flag) {
            0: parse_port_metadata;
            default: reject;                   /* the program never resubmits */
        }
    }

    state parse_port_metadata {
        pkt.advance(PORT_METADATA_SIZE);
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: not_ipv4;
        }
    }

    state not_ipv4 {
        meta.drop_reason = DropReason_t.NOT_IPV4;
        transition accept;
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        /* a copy for the MAU's length arithmetic: an operation on the 4-bit header field itself
         * would split it from the version nibble it is deparsed with */
        meta.ihl = hdr.ipv4.ihl;
        residual_untagged.subtract({hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn});
        residual_untagged.subtract({hdr.ipv4.ttl, hdr.ipv4.protocol});
        residual_untagged.subtract({hdr.ipv4.hdr_checksum});
        meta.ck_residual_untagged = residual_untagged.get();
        residual_tagged.subtract({hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn});
        residual_tagged.subtract({hdr.ipv4.ttl, hdr.ipv4.protocol});
        residual_tagged.subtract({hdr.ipv4.hdr_checksum});
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
            (4, 5): no_options;                /* untagged */
            (4, 0 &&& 0xC): bad_ihl;           /* IHL 0..3 */
            (4, 4): bad_ihl;
            (4, 6): opts_6;
            (4, 7): opts_7;
            (4, 8): opts_8;
            (4, 9): opts_9;
            (4, 10): opts_10;
            (4, 11): opts_11;
            (4, 12): opts_12;
            (4, 13): opts_13;
            (4, 14): opts_14;
            (4, 15): opts_15;
            default: bad_version;
        }
    }

    /* The option words (IHL - 5) loaded as a constant, one state per IHL: a counter
     * loaded from the IHL field itself takes a match register (compiler: "counter
     * load allocated to more than 1 registers"). */
#define OPTS_STATE(n) state opts_##n { opt_words.set((bit<8>)(n - 5)); transition parse_ipv4_options; }
    OPTS_STATE(6)
    OPTS_STATE(7)
    OPTS_STATE(8)
    OPTS_STATE(9)
    OPTS_STATE(10)
    OPTS_STATE(11)
    OPTS_STATE(12)
    OPTS_STATE(13)
    OPTS_STATE(14)
    OPTS_STATE(15)
#undef OPTS_STATE

    state bad_ihl {
        meta.drop_reason = DropReason_t.BAD_IHL;
        transition accept;
    }

    state bad_version {
        meta.drop_reason = DropReason_t.BAD_VERSION;
        transition accept;
    }

    state no_options {
        transition parse_l4_check;
    }

    /* The CoflowId option must be the first option. Its type byte, then its length
     * byte: one 8-bit match register each (the parser has 1x16b + 2x8b, and IHL stays
     * live in one of them until the options' length is known). */
    state parse_ipv4_options {
        transition select(pkt.lookahead<bit<8>>()) {
            IPOPT_COFLOW_TYPE: check_9e_len;
            default: parse_other_opts;         /* someone else's options: untagged */
        }
    }

    state check_9e_len {
        transition select(pkt.lookahead<bit<16>>()[7:0]) {
            IPOPT_COFLOW_LEN: parse_coflow_opt;
            default: other_type_9e;            /* our type, another length */
        }
    }

    /* As v1model: a well-formed 0x9e option of another length (2 .. the options
     * area) is someone else's, forwarded untagged; sanity drops the others. */
    state other_type_9e {
        meta.other_9e_len = pkt.lookahead<bit<16>>()[7:0];
        meta.other_9e = 1;
        transition parse_other_opts;
    }

    state parse_coflow_opt {
        pkt.extract(hdr.coflow_opt);
        residual_tagged.subtract({hdr.coflow_opt.stamped, hdr.coflow_opt.rsvd,
                                  hdr.coflow_opt.prio, hdr.coflow_opt.internal_id});
        meta.ck_residual_tagged = residual_tagged.get();
        meta.ck_tagged = 1;
        opt_words.decrement(2);
        transition select(opt_words.is_negative()) {
            true: opt_overflow;                /* IHL 6: an 8-byte option in a 4-byte area */
            false: parse_opt_words;            /* IHL 7: none left; 8..15: more options */
        }
    }

    state opt_overflow {
        meta.drop_reason = DropReason_t.OPT_OVERFLOW;
        transition accept;
    }

    state parse_other_opts {
        transition parse_opt_words;
    }

    state parse_opt_words {
        transition select(opt_words.is_zero()) {
            true: parse_l4_check;
            false: parse_opt_word;
        }
    }

    state parse_opt_word {
        pkt.extract(hdr.ipv4_opts.next);
        opt_words.decrement(1);
        transition parse_opt_words;
    }

    /* Only unfragmented TCP/UDP have their ports parsed (fragments hash on the
     * 3-tuple, so one datagram's fragments take one path). */
    state parse_l4_check {
        transition select(hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, 0, IP_PROTO_TCP): parse_l4;
            (0, 0, IP_PROTO_UDP): parse_l4;
            default: accept;
        }
    }

    state parse_l4 {
        pkt.extract(hdr.l4);
        meta.l4_sport = hdr.l4.sport;
        meta.l4_dport = hdr.l4.dport;
        transition accept;
    }
}

control CoflowIngressDeparser(packet_out pkt,
                              inout headers_t hdr,
                              in ingress_metadata_t meta,
                              in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_tagged;
    Checksum() ipv4_untagged;

    /* mutually exclusive conditions on one bit: one checksum unit each */
    apply {
        if (meta.ck_tagged == 1) {
            hdr.ipv4.hdr_checksum = ipv4_tagged.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.coflow_opt.stamped, hdr.coflow_opt.rsvd, hdr.coflow_opt.prio,
                hdr.coflow_opt.internal_id,
                meta.ck_residual_tagged});
        }
        if (meta.ck_tagged == 0) {
            hdr.ipv4.hdr_checksum = ipv4_untagged.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                meta.ck_residual_untagged});
        }
        pkt.emit(meta.bridged);
        pkt.emit(hdr);
    }
}

/* Egress sees the bridged header, then the packet as ingress deparsed it. The bridged
 * header is parsed and not emitted again; Ethernet and the fixed IPv4 header are parsed for
 * ECN marking (ecn_marker.p4), the rest passes as payload. The checksum is updated
 * incrementally as in ingress: the parser subtracts the first word (version, IHL, DSCP, ECN)
 * and the old checksum, which leaves the sum of every other word, options included. */
parser CoflowEgressParser(packet_in pkt,
                          out egress_headers_t hdr,
                          out egress_metadata_t meta,
                          out egress_intrinsic_metadata_t eg_intr_md) {
    Checksum() residual;

    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(meta.bridged);
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        residual.subtract({hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn});
        residual.subtract({hdr.ipv4.hdr_checksum});
        meta.ck_residual = residual.get();
        transition accept;
    }
}

control CoflowEgressDeparser(packet_out pkt,
                             inout egress_headers_t hdr,
                             in egress_metadata_t meta,
                             in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_ck;

    apply {
        if (meta.ecn_mark == 1) {
            hdr.ipv4.hdr_checksum = ipv4_ck.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, meta.ck_residual});
        }
        pkt.emit(hdr);
    }
}

#endif
