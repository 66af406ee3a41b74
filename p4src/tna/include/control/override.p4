/*
 * override.p4 (TNA) -- controller override CoflowId -> queue, as on v1model
 * (p4src/include/control/override.p4). Looked up early (its key is in the
 * packet) into separate fields; the ingress control applies it after the
 * local decision, so it still beats it.
 */
#ifndef __OVERRIDE_TNA__
#define __OVERRIDE_TNA__

control Override(inout headers_t hdr,
                 inout ingress_metadata_t meta) {

    action set_queue(prio_t prio) {
        meta.override_hit = 1;
        meta.override_prio = prio;
    }

    action no_override() {
        meta.override_hit = 0;
    }

    table coflow_override {
        key = {
            hdr.coflow_opt.external_id: exact @name("external_id");
            hdr.coflow_opt.internal_id: exact @name("internal_id");
        }
        actions = { set_queue; @defaultonly no_override; }
        const default_action = no_override();
        size = OVERRIDE_TABLE_SIZE;
    }

    apply {
        coflow_override.apply();
    }
}

#endif
