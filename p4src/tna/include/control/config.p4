/*
 * config.p4 (TNA) -- port roles and the mode with its parameters, as on v1model
 * (p4src/include/control/config.p4). One difference: heavy_bytes is in the byte
 * registers' units (2^TNA_BYTES_UNIT_SHIFT bytes, 32 bits); the controller
 * converts (coflow.tofino.target).
 */
#ifndef __CONFIG_TNA__
#define __CONFIG_TNA__

control PipelineConfig(inout headers_t hdr,
                       inout ingress_metadata_t meta,
                       in ingress_intrinsic_metadata_t ig_intr_md) {

    action set_role(bit<1> role) {
        meta.role = (PortRole_t)role;   /* bit<1> in the P4Info */
    }

    table port_role {
        key = { ig_intr_md.ingress_port: exact @name("ingress_port"); }
        actions = { set_role; }
        const default_action = set_role((bit<1>)PortRole_t.EDGE);
        size = PORT_ROLE_TABLE_SIZE;
    }

    action set_config(bit<8> mode, prio_t fair_prio, tna_units_t heavy_bytes,
                      coflow_ext_t fifo_base, bit<1> managed, epoch_t slot_idle_epochs) {
        meta.mode = (Mode_t)mode;        /* bit<8> in the P4Info */
        meta.fair_prio = fair_prio;
        meta.heavy_bytes = heavy_bytes;
        meta.fifo_base = fifo_base;
        meta.managed = managed;
        /* slot_idle_epochs: in the P4Info as on v1model; the TNA idle age is the constant
         * SLOT_IDLE_EPOCHS << TNA_IDLE_SHIFT (coflow_counter.p4) */
    }

    table pipeline_config {
        actions = { set_config; }
        default_action = set_config((bit<8>)Mode_t.DCLAS, 4, TNA_UNITS_MAX, 0, 0, SLOT_IDLE_EPOCHS);
        size = 1;
    }

    apply {
        port_role.apply();
        pipeline_config.apply();
        meta.epoch = ig_intr_md.ingress_mac_tstamp[47:TNA_EPOCH_SHIFT];   /* slot age clock */
    }
}

#endif
