/*
 * config.p4 (TNA) -- port roles and the mode with its parameters, as on v1model
 * (p4src/include/control/config.p4). One difference: heavy_bytes is in the byte
 * registers' units (2^TNA_BYTES_UNIT_SHIFT bytes, 32 bits); the controller
 * converts (coflow.tofino.target).
 *
 * The slot age clock (issue 28) is here too: 32 bits of 2^24 ns that do not wrap for 2.28
 * years. The 48-bit MAC timestamp wraps every 78 h, and the owner register compares ages
 * exactly, not modulo 2^32: bf-p4c (p4lang/p4c backends/tofino/bf-p4c/mau/stateful_alu.cpp,
 * CreateSaluInstruction::preorder(Relation)) turns `now - seen >= C` on bit<32> into one
 * "geq.u" compare of the sum now + (-seen) + (-C), which the stateful ALU evaluates without
 * wrapping; the wrapping kind it has ("uus", chosen for int<W> differences at the ALU's width)
 * tests the sign of the 32-bit sum, which splits ages at 2^31 units, not at C: a never-used
 * slot (seen = 0) would look busy for half of every clock period. One stateful ALU has two
 * comparators (owner = tag, and the age), so neither exact nor sign tests can express "age
 * modulo 2^32 >= C" (two intervals); a clock that does not wrap makes the exact test right.
 * So the clock counts the timestamp's wraps: a one-entry register keeps the last packet's
 * timestamp bits and adds TNA_CLOCK_WRAP_STEP when they go down (at most one wrap between two
 * packets of a pipe less than 78 h apart). The count it returns is the one before this packet
 * (an output read before the update): the one packet that sees a wrap gets a clock 78 h
 * behind, once per 78 h per pipe.
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
        key = { meta.ig_port: exact @name("ingress_port"); }
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

    Register<clock_state_t, bit<1>>(1, {0, 0}) slot_clock_reg;

    RegisterAction<clock_state_t, bit<1>, bit<32>>(slot_clock_reg) clock_tick = {
        void apply(inout clock_state_t s, out bit<32> wraps) {
            wraps = s.wraps;
            if (meta.ts_clock < s.last_ts) {
                s.wraps = s.wraps + TNA_CLOCK_WRAP_STEP;
            }
            s.last_ts = meta.ts_clock;
        }
    };

    apply {
        port_role.apply();
        pipeline_config.apply();
        /* slot age clock: wraps (register) + MAC timestamp[47:24], one step each */
        meta.ts_clock = (bit<32>)ig_intr_md.ingress_mac_tstamp[47:TNA_EPOCH_SHIFT];
        meta.clock_wraps = clock_tick.execute(0);
        meta.epoch = meta.clock_wraps + meta.ts_clock;
    }
}

#endif
