/*
 * default_class.p4 -- the class of untagged traffic at an edge port.
 * A ternary table on the sender's DSCP (the unprivileged fallback: IP_TOS),
 * the IP protocol and a range of IP total lengths; its default action, which
 * the controller may rewrite, is the default class.
 *
 * The protocol + length keys let the controller put small untagged TCP
 * segments (the receivers' pure ACKs, SYN-ACKs and FINs: their sockets carry
 * no CoflowId) in the highest class. In the default class, the lowest, every
 * data packet going the other way would have precedence over them under
 * strict priority, and bulk data in one direction would stall the ACK clock
 * of every flow in the other.
 */
#ifndef __DEFAULT_CLASS__
#define __DEFAULT_CLASS__

control DefaultClass(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t std_meta) {

    action set_class(prio_t prio) {
        meta.prio = prio;
    }

    table untagged_class {
        key = {
            hdr.ipv4.dscp:      ternary @name("dscp");
            hdr.ipv4.protocol:  ternary @name("protocol");
            hdr.ipv4.total_len: range   @name("ip_len");
        }
        actions = { set_class; }
        default_action = set_class(PRIO_LOWEST);
        size = UNTAGGED_CLASS_TABLE_SIZE;
    }

    apply {
        untagged_class.apply();
    }
}

#endif
