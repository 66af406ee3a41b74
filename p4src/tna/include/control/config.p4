/*
 * config.p4 (TNA) -- port roles and the mode with its parameters, as on v1model
 * (p4src/include/control/config.p4). One difference: heavy_bytes is in the byte
 * registers' units (2^TNA_BYTES_UNIT_SHIFT bytes, 32 bits); the controller
 * converts (coflow.tofino.target).
 *
 * The slot age clock is here too: 32 bits of 2^30 ns (size.p4). The 48-bit MAC timestamp
 * wraps every 78 h, so a one-entry register {last_ts, wraps} counts its wraps
 * (SLOT_CLOCK_TICK, p4src/include/slot_clock.p4, tested on BMv2 by
 * tests/test_slot_clock_bmv2.py). Tofino stamps a packet when its port receives it and the
 * ports' packets merge afterwards, so the timestamps a pipe's packets bring are not in order:
 * only a drop of at least half the timestamp's range (39 h) is a wrap, a rise of more than half
 * is a late packet from before the last wrap (one wrap back for it, and the next packet's drop
 * restores it), and a small step either way changes no count. The packet's clock is the
 * register's new count plus its own timestamp bits: every packet, also one at a wrap, gets the
 * clock of its own timestamp. The count starts at one wrap (TNA_CLOCK_WRAP_STEP), so that a
 * first packet late in the timestamp's range, read as the period before, does not take the
 * clock below 0. The slot owners compare ages in serial-number arithmetic (coflow_counter.p4),
 * so a count that went wrong, or the clock's own wrap after 146 years, delays takeovers by at
 * most the error; it never keeps a slot busy for good.
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
         * SLOT_IDLE_EPOCHS (coflow_counter.p4) */
    }

    table pipeline_config {
        actions = { set_config; }
        default_action = set_config((bit<8>)Mode_t.DCLAS, 4, TNA_UNITS_MAX, 0, 0, SLOT_IDLE_EPOCHS);
        size = 1;
    }

    Register<clock_state_t, bit<1>>(1, {0, TNA_CLOCK_WRAP_STEP}) slot_clock_reg;

    /* two compares (what one stateful ALU has), the count's two updates and the timestamp's
     * one; the output is the new count (the low ALU's result) */
    RegisterAction<clock_state_t, bit<1>, bit<32>>(slot_clock_reg) clock_tick = {
        void apply(inout clock_state_t s, out bit<32> wraps) {
            SLOT_CLOCK_TICK(s.last_ts, s.wraps, meta.ts_clock, TNA_CLOCK_WRAP_STEP)
            wraps = s.wraps;
        }
    };

    apply {
        port_role.apply();
        pipeline_config.apply();
        /* slot age clock: wraps (register) + MAC timestamp[47:30], one step each */
        meta.ts_clock = (bit<32>)ig_intr_md.ingress_mac_tstamp[47:TNA_EPOCH_SHIFT];
        meta.clock_wraps = clock_tick.execute(0);
        meta.epoch = meta.clock_wraps + meta.ts_clock;
    }
}

#endif
