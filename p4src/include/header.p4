/*
 * header.p4 -- packet headers and the metadata carried through the pipeline.
 */
#ifndef __HEADER__
#define __HEADER__

#include "define.p4"

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<1>      flag_rsvd;
    bit<1>      flag_df;
    bit<1>      flag_mf;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

/* The CoflowId option (8 bytes, so IHL = 7 when it is the only option):
 *   byte 0   type 0x9e
 *   byte 1   length 8
 *   byte 2   stamp: S (1 bit: an edge switch decided) | 4 reserved bits | priority (3 bits)
 *   byte 3   internal id (Aalo stage)
 *   byte 4-7 external id (Aalo job / DAG), big-endian
 */
header coflow_opt_t {
    bit<8>       opt_type;
    bit<8>       opt_len;
    bit<1>       stamped;
    bit<4>       rsvd;
    prio_t       prio;
    coflow_int_t internal_id;
    coflow_ext_t external_id;
}

/* Any other option bytes, kept opaque and deparsed unchanged (max 40 bytes). */
header ipv4_opts_t {
    varbit<320> data;
}

#ifdef __TARGET_TOFINO__
/* Tofino's parser takes them as a stack of 32-bit words counted down by a
 * ParserCounter (a varbit length keeps IHL in one of its three match registers,
 * which the L4 check and the option type need). */
#define IPV4_OPT_WORDS 10
header ipv4_opt_word_t {
    bit<32> data;
}
#endif

/* First four bytes of TCP and UDP: all the pipeline reads of L4. */
header l4_ports_t {
    bit<16> sport;
    bit<16> dport;
}

struct headers_t {
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    coflow_opt_t coflow_opt;
#ifdef __TARGET_TOFINO__
    ipv4_opt_word_t[IPV4_OPT_WORDS] ipv4_opts;
#else
    ipv4_opts_t  ipv4_opts;
#endif
    l4_ports_t   l4;
}

struct local_metadata_t {
    DropReason_t drop_reason;    /* set by the parser or a later control */
    bit<1>       other_9e;       /* first option has type 0x9e but length != 8 */
    bit<8>       other_9e_len;   /* ... and this length (sanity checks it) */
    PortRole_t   role;           /* of the ingress port */
    /* pipeline_config */
    Mode_t       mode;
    prio_t       fair_prio;
    bytes_t      heavy_bytes;
    coflow_ext_t fifo_base;
    bit<1>       managed;        /* a controller is in charge: unregistered coflows go last */
    epoch_t      slot_idle_epochs; /* a hashed slot idle this long is taken over */
    /* flow identity */
    bit<16>      l4_sport;
    bit<16>      l4_dport;
    /* ECMP (routing.p4): this switch's hash window, the 5-tuple's hash, the selector's key */
    bit<8>       ecmp_shift;
    bit<32>      flow_hash;
    bit<16>      ecmp_key;
    /* coflow state */
    bit<32>      slot;
    bit<1>       slot_assigned;
    coflow_tag_t tag;            /* {1, ext, int} of this packet */
    coflow_tag_t slot_owner;     /* tag stored in the slot */
    epoch_t      epoch;          /* now: ingress timestamp >> EPOCH_SHIFT */
    epoch_t      slot_seen;      /* epoch of the slot owner's last packet */
    bytes_t      bytes_before;   /* the coflow's bytes before this packet */
    bytes_t      report_mask;    /* report_step's ~(step - 1) for the slot (report.p4) */
    prio_t       prio;
    bit<32>      meter_idx;
    bit<2>       color;
}

#endif
