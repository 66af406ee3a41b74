/*
 * config.p4 -- what the controller configures without recompiling:
 * the role of each ingress port and the scheduling mode with its parameters.
 */
#ifndef __CONFIG__
#define __CONFIG__

control PipelineConfig(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t std_meta) {

    action set_role(bit<1> role) {
        meta.role = (PortRole_t)role;   /* bit<1> in the P4Info */
    }

    /* Host-facing ports are edges (count, decide, meter, stamp); ports that
     * face other switches are fabric ports (trust the stamp). Unlisted ports
     * are edges, so a single switch works with no entry at all. */
    table port_role {
        key = { std_meta.ingress_port: exact @name("ingress_port"); }
        actions = { set_role; }
        const default_action = set_role((bit<1>)PortRole_t.EDGE);
        size = PORT_ROLE_TABLE_SIZE;
    }

    /* The controller rewrites the default action of this keyless table:
     * mode (Mode_t), the class of FAIR/RATE mode, FIFO-LM's heavy threshold
     * in bytes, FIFO-LM's base external id (the oldest active coflow),
     * managed = 1 (a controller is in charge: a tagged coflow it did not give a
     * slot in coflow_slot is served at PRIO_LOWEST, below every registered one)
     * and the idle age, in epochs, after which a hashed slot is taken over
     * (coflow_counter.p4). The initial default is what runs with no controller:
     * D-CLAS, Aalo's fallback for unknown coflows (top queue, demoted by their
     * hashed slot's bytes), SLOT_IDLE_EPOCHS. */
    action set_config(bit<8> mode, prio_t fair_prio, bytes_t heavy_bytes,
                      coflow_ext_t fifo_base, bit<1> managed, epoch_t slot_idle_epochs) {
        meta.mode = (Mode_t)mode;        /* bit<8> in the P4Info */
        meta.fair_prio = fair_prio;
        meta.heavy_bytes = heavy_bytes;
        meta.fifo_base = fifo_base;
        meta.managed = managed;
        meta.slot_idle_epochs = slot_idle_epochs;
    }

    table pipeline_config {
        actions = { set_config; }
        default_action = set_config((bit<8>)Mode_t.DCLAS, 4, 0xffffffffffffffff, 0, 0, SLOT_IDLE_EPOCHS);
        size = 1;
    }

    apply {
        port_role.apply();
        pipeline_config.apply();
    }
}

#endif
