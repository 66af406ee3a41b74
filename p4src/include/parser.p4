/*
 * parser.p4 -- robust parser and deparser.
 *
 * Every malformed case ends in `accept` with meta.drop_reason set, or in a
 * parser error (BMv2 then runs ingress with standard_metadata.parser_error
 * set); the sanity control drops and counts both. Nothing loops, so no
 * input can make the parser run away.
 */
#ifndef __PARSER__
#define __PARSER__

#include "header.p4"

parser CoflowParser(packet_in packet,
                    out headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t std_meta) {

    state start {
        meta.drop_reason = DropReason_t.NONE;
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
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
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
            (4, 5): parse_l4_check;            /* no options: untagged */
            (4, 0 &&& 0xC): bad_ihl;           /* IHL 0..3 */
            (4, 4): bad_ihl;
            (4, _): parse_ipv4_options;        /* IHL 6..15 */
            default: bad_version;
        }
    }

    state bad_ihl {
        meta.drop_reason = DropReason_t.BAD_IHL;
        transition accept;
    }

    state bad_version {
        meta.drop_reason = DropReason_t.BAD_VERSION;
        transition accept;
    }

    /* The CoflowId option must be the first option (the sender sets only it). */
    state parse_ipv4_options {
        transition select(packet.lookahead<bit<16>>()) {
            0x9e08: parse_coflow_opt;
            0x9e00 &&& 0xff00: other_type_9e;  /* our type, another length */
            default: parse_other_opts;         /* someone else's options: untagged */
        }
    }

    /* Type 0x9e is RFC 4727's experimental option 30, which others may use with another
     * length: a well-formed one (length 2 .. the options area) is someone else's option,
     * forwarded untagged like any other; the sanity control drops a length below 2 or past
     * the options area (DropReason_t.OPT_LEN), once the options area was extracted (a truncated
     * frame is DropReason_t.TRUNCATED first). */
    state other_type_9e {
        bit<16> head = packet.lookahead<bit<16>>();
        meta.other_9e_len = head[7:0];
        meta.other_9e = 1;
        transition parse_other_opts;
    }

    state parse_coflow_opt {
        packet.extract(hdr.coflow_opt);
        transition select(hdr.ipv4.ihl) {
            6: opt_overflow;                   /* 8-byte option in a 4-byte options area */
            7: parse_l4_check;
            default: parse_rest_opts;          /* IHL 8..15: more options follow */
        }
    }

    state opt_overflow {
        meta.drop_reason = DropReason_t.OPT_OVERFLOW;
        transition accept;
    }

    state parse_rest_opts {
        packet.extract(hdr.ipv4_opts, (((bit<32>)hdr.ipv4.ihl) - 7) << 5);
        transition parse_l4_check;
    }

    state parse_other_opts {
        packet.extract(hdr.ipv4_opts, (((bit<32>)hdr.ipv4.ihl) - 5) << 5);
        transition parse_l4_check;
    }

    /* Only unfragmented TCP/UDP datagrams have their ports parsed. Every
     * fragment (MF set or offset != 0) hashes on the 3-tuple, so all the
     * fragments of one datagram take the same ECMP path. */
    state parse_l4_check {
        transition select(hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, 0, IP_PROTO_TCP): parse_l4;
            (0, 0, IP_PROTO_UDP): parse_l4;
            default: accept;
        }
    }

    /* BMv2 zeroes metadata for every packet: fragments and non-TCP/UDP hash with ports 0. */
    state parse_l4 {
        packet.extract(hdr.l4);
        meta.l4_sport = hdr.l4.sport;
        meta.l4_dport = hdr.l4.dport;
        transition accept;
    }
}

control CoflowDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.coflow_opt);
        packet.emit(hdr.ipv4_opts);
        packet.emit(hdr.l4);
    }
}

control CoflowVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

/* The IPv4 checksum covers the options: the CoflowId option's fields and any
 * other options (an opaque varbit). BMv2 skips invalid headers, so one list
 * serves packets with and without options. Computed natively by BMv2 (csum16),
 * which costs far less per packet than the same sum as P4 expressions. */
control CoflowComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flag_rsvd, hdr.ipv4.flag_df, hdr.ipv4.flag_mf, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
              hdr.coflow_opt.opt_type, hdr.coflow_opt.opt_len, hdr.coflow_opt.stamped,
              hdr.coflow_opt.rsvd, hdr.coflow_opt.prio, hdr.coflow_opt.internal_id,
              hdr.coflow_opt.external_id, hdr.ipv4_opts.data },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

#endif
