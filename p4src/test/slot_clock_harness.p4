/*
 * slot_clock_harness.p4 -- a v1model program that runs the slot age clock's arithmetic
 * (p4src/include/slot_clock.p4, the macros the Tofino program's stateful ALUs use) on values a
 * test puts in a packet, and sends the packet back with the results.
 *
 * A frame of EtherType 0x88b5 (IEEE local experimental) carries clock_test_h: the clock
 * register's state {last, wraps}, the packet's timestamp bits `ts` and the wrap `step` go in;
 * the harness applies SLOT_CLOCK_TICK to them, returns the new state with now = the count
 * before the update + ts,
 * sets `idle` to SLOT_CLOCK_IDLE(now, expire) for the slot expiry `expire` it got, and returns
 * SLOT_CLOCK_EXPIRE(now, span) in `expire`. Any other frame is dropped. Each packet
 * stands alone (BMv2 drops some frames of a fast pcap replay; a lost one is sent again):
 * tests/test_slot_clock_bmv2.py gives packet i+1 the state packet i's answer must hold, and
 * checks that every answer holds it, so the compiled steps chain as the register would.
 */
#include <core.p4>
#include <v1model.p4>
#include "../include/slot_clock.p4"

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header clock_test_h {
    bit<32> seq;        /* the test's packet number, returned as it came */
    bit<32> step;
    bit<32> last;
    bit<32> wraps;
    bit<32> ts;
    bit<32> now;
    bit<32> span;
    bit<32> expire;     /* in: the slot's expiry; out: SLOT_CLOCK_EXPIRE(now, span) */
    bit<8>  idle;       /* out: SLOT_CLOCK_IDLE(now, expire in) */
}

struct headers_t {
    ethernet_h   eth;
    clock_test_h clk;
}

struct meta_t { }

parser HParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
               inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            0x88b5: clock;
            default: accept;
        }
    }
    state clock {
        pkt.extract(hdr.clk);
        transition accept;
    }
}

control HVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control HIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (!hdr.clk.isValid()) {
            mark_to_drop(sm);
            return;
        }
        bit<32> count;
        SLOT_CLOCK_TICK(hdr.clk.last, hdr.clk.wraps, hdr.clk.ts, hdr.clk.step, count)
        hdr.clk.now = count + hdr.clk.ts;
        hdr.clk.idle = SLOT_CLOCK_IDLE(hdr.clk.now, hdr.clk.expire) ? 8w1 : 8w0;
        hdr.clk.expire = SLOT_CLOCK_EXPIRE(hdr.clk.now, hdr.clk.span);
        sm.egress_spec = sm.ingress_port;
    }
}

control HEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control HCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control HDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.clk);
    }
}

V1Switch(HParser(), HVerify(), HIngress(), HEgress(), HCompute(), HDeparser()) main;
