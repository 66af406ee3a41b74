/*
 * l3fwd.p4 -- minimal IPv4 LPM forwarding, the baseline of `make bench-p4`.
 * Same BMv2 build, same traffic, one table: the ratio against coflow.p4 is
 * the cost of the coflow features.
 */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len;
    bit<16> identification; bit<3> flags; bit<13> frag_offset;
    bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum;
    bit<32> src_addr; bit<32> dst_addr;
}
struct headers_t { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata_t { }

parser L3Parser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t std_meta) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control L3Ingress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t std_meta) {
    action drop() { mark_to_drop(std_meta); }
    action forward(bit<9> port, bit<48> smac, bit<48> dmac) {
        std_meta.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        /* TTL - 1 with an incremental checksum update (RFC 1624), which
         * stays correct when the header carries options. */
        bit<16> old_tp = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        bit<16> new_tp = hdr.ipv4.ttl ++ hdr.ipv4.protocol;
        bit<32> sum = (bit<32>)(~hdr.ipv4.hdr_checksum) + (bit<32>)(~old_tp) + (bit<32>)new_tp;
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        hdr.ipv4.hdr_checksum = ~sum[15:0];
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { forward; drop; }
        default_action = drop();
        size = 1024;
    }
    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

control L3Egress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t std_meta) {
    apply { }
}

control L3VerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control L3ComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control L3Deparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(L3Parser(), L3VerifyChecksum(), L3Ingress(), L3Egress(),
         L3ComputeChecksum(), L3Deparser()) main;
