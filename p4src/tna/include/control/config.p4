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
 * is a late packet from before the last wrap (it changes nothing), and a small step either way
 * changes no count. The packet's clock is the count before its own update plus its timestamp
 * bits: the first packet past a wrap gets a clock 78 h behind, and a late packet from before
 * it one 78 h ahead (a few packets per pipe every 78 h); every other packet its own. The
 * register starts with last_ts in the middle of the range, so a first packet anywhere in it
 * is in the same period. The slot owners compare ages in serial-number arithmetic
 * (coflow_counter.p4), so a clock that is wrong for a packet, or the clock's own wrap after
 * 146 years, delays or hastens a takeover by at most its error; it never keeps a slot busy for
 * good.
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

    Register<clock_state_t, bit<1>>(1, {(TNA_CLOCK_WRAP_STEP >> 1) - 1, 0}) slot_clock_reg;

    /* two compares (what one stateful ALU has), the count's one update, the timestamp's two
     * (same value, two predicates); the output is the stored count (mem_hi, read before the
     * update) */
    RegisterAction<clock_state_t, bit<1>, bit<32>>(slot_clock_reg) clock_tick = {
        void apply(inout clock_state_t s, out bit<32> wraps) {
            SLOT_CLOCK_TICK(s.last_ts, s.wraps, meta.ts_clock, TNA_CLOCK_WRAP_STEP, wraps)
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
