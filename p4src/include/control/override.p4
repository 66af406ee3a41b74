/*
 * override.p4 -- controller override CoflowId -> queue. Used for global
 * D-CLAS (sizes summed over every edge) and SEBF ordering; it beats whatever
 * the switch decided locally or read from the stamp.
 */
#ifndef __OVERRIDE__
#define __OVERRIDE__

control Override(inout headers_t hdr,
                 inout local_metadata_t meta,
                 inout standard_metadata_t std_meta) {

    action set_queue(prio_t prio) {
        meta.prio = prio;
    }

    table coflow_override {
        key = {
            hdr.coflow_opt.external_id: exact @name("external_id");
            hdr.coflow_opt.internal_id: exact @name("internal_id");
        }
        actions = { set_queue; @defaultonly NoAction; }
        const default_action = NoAction();
        size = OVERRIDE_TABLE_SIZE;
    }

    apply {
        coflow_override.apply();
    }
}

#endif
