/*
 * default_class.p4 -- the class of untagged traffic at an edge port.
 * A ternary table on the sender's DSCP (the unprivileged fallback: IP_TOS);
 * its default action, which the controller may rewrite, is the default class.
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
        key = { hdr.ipv4.dscp: ternary @name("dscp"); }
        actions = { set_class; }
        default_action = set_class(PRIO_LOWEST);
        size = UNTAGGED_CLASS_TABLE_SIZE;
    }

    apply {
        untagged_class.apply();
    }
}

#endif
