/*
 * sanity.p4 -- classify what the parser marked malformed into a drop reason.
 * The packet is dropped and the reason counted at the end of ingress (queue_stats.p4).
 */
#ifndef __SANITY__
#define __SANITY__

control Sanity(inout headers_t hdr,
               inout local_metadata_t meta,
               inout standard_metadata_t std_meta) {

    /* The common (valid) path evaluates three conditions; the reason is worked out only
     * for packets that fail. The parser set DropReason_t.NOT_IPV4 for non-IPv4 frames, and
     * meta.other_9e for a first option of type 0x9e whose length is not ours. */
    apply {
        if (std_meta.parser_error != error.NoError) {
            if (std_meta.parser_error == error.PacketTooShort) {
                meta.drop_reason = DropReason_t.TRUNCATED;
            } else {
                meta.drop_reason = DropReason_t.PARSER_OTHER;
            }
        } else if (meta.other_9e == 1
                   && (meta.other_9e_len < 2
                       || meta.other_9e_len > ((((bit<8>)hdr.ipv4.ihl) - 5) << 2))) {
            meta.drop_reason = DropReason_t.OPT_LEN;  /* 0x9e, length < 2 or past the options */
        } else if (meta.drop_reason == DropReason_t.NONE
                   && (hdr.ipv4.total_len < (((bit<16>)hdr.ipv4.ihl) << 2)
                       || std_meta.packet_length < 14 + (bit<32>)hdr.ipv4.total_len
                       || hdr.ipv4.ttl <= 1)) {
            if (hdr.ipv4.total_len < (((bit<16>)hdr.ipv4.ihl) << 2)
                || std_meta.packet_length < 14 + (bit<32>)hdr.ipv4.total_len) {
                meta.drop_reason = DropReason_t.TOTAL_LEN;
            } else {
                meta.drop_reason = DropReason_t.TTL;
            }
        }
    }
}

#endif
