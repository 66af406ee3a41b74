/*
 * parser.p4 (TNA) -- the v1model parser's states (p4src/include/parser.p4) on
 * Tofino, the ingress and egress deparsers, and the IPv4 checksum.
 *
 * Malformed cases end in `accept` with meta.drop_reason set, or in a parser
 * error flag (ig_prsr_md.parser_err; reading it in ingress keeps the packet,
 * so the sanity control drops and counts it, as on v1model). Nothing loops.
 *
 * IPv4 header checksum (issue 28): recomputed in the ingress deparser from the
 * header's fields, the CoflowId option's and every other option word, as
 * stratum/fabric-tna does (p4src/tna/include/parser.p4, FabricEgressDeparser) and
 * open-p4studio's p4_16_programs/tna_checksum for the IPv4 header. No parser
 * residual: a Checksum's get() (or subtract_all_and_deposit) puts the parser's
 * checksum unit in residual mode, which keeps running to the end of parsing and
 * subtracts every field extracted after the call (p4lang/p4c backends/tofino/
 * bf-p4c/p4include/tofino1_base.p4; parde/extract_parser.cpp lowers get() to a
 * ChecksumResidualDeposit, parde/parser_query.cpp places it at the end of
 * parsing): the option words and L4 ports extracted after it were taken out of
 * the sum, and the deparser never added them back.
 * Tofino 1's deparser checksum units read their PHV containers whether or not
 * a header is valid (parde/lowered/compute_lowered_deparser_ir.cpp: no POV bit
 * per input on Tofino), and a container the parser did not write is zero
 * (bf-p4c relies on the parser's implicit zero initialization), so the option
 * words a packet does not have add nothing. Two units, on one metadata bit:
 * the CoflowId option's fields are in the tagged one only (the stamp writes
 * coflow_opt.prio into an untagged packet's invalid header).
 * Egress rewrites only ECN (to CE): its checksum is updated incrementally,
 * RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), where ~m + m' is the codepoint's
 * increase (ecn_marker.p4), with no parser checksum at all.
 */
#ifndef __PARSER_TNA__
#define __PARSER_TNA__

parser CoflowIngressParser(packet_in pkt,
                           out headers_t hdr,
                           out ingress_metadata_t meta,
                           out ingress_intrinsic_metadata_t ig_intr_md) {
    ParserCounter() opt_words;         /* 32-bit option words still to parse */

    /* intrinsic metadata, then the port metadata (open-p4studio common/util.p4) */
    state start {
        pkt.extract(ig_intr_md);
        meta.ig_port = (tna_port_t)ig_intr_md.ingress_port;
        /* the report digest's port (its pipe: bits 8:7, the controller's to take). Not the
         * pipe itself: the port's bits 8:7 sit at bit 7 of their byte, and bf-p4c refuses a
         * field the parser writes at one in-byte alignment and the digest packs at another
         * ("Inferred incompatible container alignments"); the whole port starts at bit 0 */
        meta.report_port = (bit<16>)ig_intr_md.ingress_port;
        meta.bridged.setValid();
        meta.bridged.prio = PRIO_LOWEST;
        meta.drop_reason = DropReason_t.NONE;
        meta.other_9e = 0;
        meta.other_9e_len = 0;
        meta.ck_tagged = 0;
        meta.route_miss = 0;
        meta.forward = 0;
        meta.decide = 0;
        meta.report_on = 0;
        meta.slot_restart = 0;
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

/* The header checksum from every header word: the fixed header without its checksum, then the
 * options (the CoflowId option first, when there is one, then the other option words; words a
 * packet does not have are zero). Tagged: at most IPV4_OPT_WORDS - 2 other words follow the
 * 8-byte option. */
#define IPV4_FIXED_WORDS(h) h.version, h.ihl, h.dscp, h.ecn, h.total_len, h.identification, \
    h.flag_rsvd, h.flag_df, h.flag_mf, h.frag_offset, h.ttl, h.protocol, h.src_addr, h.dst_addr
#define COFLOW_OPT_WORDS(o) o.opt_type, o.opt_len, o.stamped, o.rsvd, o.prio, o.internal_id, \
    o.external_id
#define OPT_WORDS_8(w) w[0].data, w[1].data, w[2].data, w[3].data, w[4].data, w[5].data, \
    w[6].data, w[7].data

control CoflowIngressDeparser(packet_out pkt,
                              inout headers_t hdr,
                              in ingress_metadata_t meta,
                              in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_tagged;
    Checksum() ipv4_untagged;
    Digest<report_digest_t>(TNA_REPORT_DIGEST_TYPE) report_digest;   /* report.p4 */

    /* mutually exclusive conditions on one bit: one checksum unit each */
    apply {
        if (meta.ck_tagged == 1) {
            hdr.ipv4.hdr_checksum = ipv4_tagged.update({
                IPV4_FIXED_WORDS(hdr.ipv4),
                COFLOW_OPT_WORDS(hdr.coflow_opt),
                OPT_WORDS_8(hdr.ipv4_opts)});
        }
        if (meta.ck_tagged == 0) {
            hdr.ipv4.hdr_checksum = ipv4_untagged.update({
                IPV4_FIXED_WORDS(hdr.ipv4),
                OPT_WORDS_8(hdr.ipv4_opts), hdr.ipv4_opts[8].data, hdr.ipv4_opts[9].data});
        }
        if (ig_dprsr_md.digest_type == TNA_REPORT_DIGEST_TYPE) {
            report_digest.pack({meta.slot, hdr.coflow_opt.external_id,
                                hdr.coflow_opt.internal_id, meta.report_after,
                                meta.report_port});
        }
        pkt.emit(meta.bridged);
        pkt.emit(hdr);
    }
}

/* Egress sees the bridged header, then the packet as ingress deparsed it. The bridged
 * header is parsed and not emitted again; Ethernet and the fixed IPv4 header are parsed for
 * ECN marking (ecn_marker.p4), the rest passes as payload. */
parser CoflowEgressParser(packet_in pkt,
                          out egress_headers_t hdr,
                          out egress_metadata_t meta,
                          out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        meta.eg_port = (tna_port_t)eg_intr_md.egress_port;
        pkt.extract(meta.bridged);
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

/* ECN marking changed the first word's ECN bits only (ECT(0) or ECT(1) -> CE): the checksum
 * is updated incrementally, HC' = ~(~HC + ~m + m') (RFC 1624 eqn. 3), and ~m + m' is the
 * codepoint's increase, meta.ecn_delta (ones' complement sums). Options pass as payload and
 * need not be parsed. */
control CoflowEgressDeparser(packet_out pkt,
                             inout egress_headers_t hdr,
                             in egress_metadata_t meta,
                             in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_ck;

    apply {
        if (meta.ecn_mark == 1) {
            hdr.ipv4.hdr_checksum = ipv4_ck.update({meta.ck_inv, meta.ecn_delta});
        }
        pkt.emit(hdr);
    }
}

#endif
