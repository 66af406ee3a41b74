/*
 * sanity.p4 -- classify what the parser marked malformed into a drop reason.
 * The packet is dropped and the reason counted at the end of ingress (queue_stats.p4).
 */
#ifndef __SANITY__
#define __SANITY__

control Sanity(inout headers_t hdr,
               inout local_metadata_t meta,
               inout standard_metadata_t std_meta) {

    apply {
        /* meta.drop_reason already holds what the parser found (DROP_NONE = 0) */
        if (std_meta.parser_error == error.PacketTooShort) {
            meta.drop_reason = DROP_TRUNCATED;
        } else if (std_meta.parser_error != error.NoError) {
            meta.drop_reason = DROP_PARSER_OTHER;
        } else if (meta.drop_reason == DROP_NONE) {
            if (!hdr.ipv4.isValid()) {
                meta.drop_reason = DROP_NOT_IPV4;
            } else if (hdr.ipv4.total_len < (((bit<16>)hdr.ipv4.ihl) << 2)
                       || std_meta.packet_length < 14 + (bit<32>)hdr.ipv4.total_len) {
                meta.drop_reason = DROP_TOTAL_LEN;
            } else if (hdr.ipv4.ttl <= 1) {
                meta.drop_reason = DROP_TTL;
            }
        }
    }
}

#endif
