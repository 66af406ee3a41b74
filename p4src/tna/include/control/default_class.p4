/*
 * default_class.p4 (TNA) -- the class of untagged traffic at an edge port, as on
 * v1model (p4src/include/control/default_class.p4): ternary DSCP and protocol,
 * range on the IPv4 total length (16 bits: 4 PHV nibbles), default action the
 * default class.
 */
#ifndef __DEFAULT_CLASS_TNA__
#define __DEFAULT_CLASS_TNA__

control DefaultClass(inout headers_t hdr,
                     inout ingress_metadata_t meta) {

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
