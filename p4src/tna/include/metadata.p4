/*
 * metadata.p4 (TNA) -- per-packet metadata of the TNA program and the header
 * bridged from ingress to egress (TNA gives egress none of ingress's metadata:
 * the pattern of open-p4studio's p4_16_programs/tna_bridged_md).
 * The packet headers themselves are the shared ones (p4src/include/header.p4).
 */
#ifndef __METADATA_TNA__
#define __METADATA_TNA__

typedef bit<TNA_SLOT_BITS> tna_slot_t;

/* A port as the controller names it (issue 28). Tables key on it and actions take it; the
 * intrinsic PortId_t is cast at the boundary (the parsers, set_next_hop).
 * - Stratum's build (build/tofino): P4Runtime carries it translated, 32 bits wide, and Stratum
 *   (--experimental_enable_p4runtime_translation) maps the chassis config's singleton port id to
 *   the SDK device port the pipeline sees. The pattern of stratum/fabric-tna
 *   p4src/shared/define.p4 (FabricPortId_t).
 * - bf_switchd's build (build/tofino-bf_switchd, -DTNA_UNTRANSLATED_PORTS): bf_switchd's
 *   P4Runtime server (PI and bf-drivers' pi_*.c) reads no translated_type and sizes a key from
 *   the P4Info's bitwidth, so a 32-bit translated port would be handed to a 9-bit key as 4
 *   bytes; this build keeps the SDK port's 9 bits and the controller writes SDK ports
 *   (coflow.tofino.ports). */
#ifdef TNA_UNTRANSLATED_PORTS
type bit<9> tna_port_t;
#else
@p4runtime_translation("tna/PortId_t", 32)
type bit<9> tna_port_t;
#endif
const bit<2> ECN_ECT0 = 2;         /* ECT(0) (RFC 3168); ECT(1) is 1 */
typedef bit<32> tna_units_t;       /* 2^TNA_BYTES_UNIT_SHIFT-byte units (a stateful ALU word) */
typedef bit<32> tna_tag_t;         /* slot owner: {1, CRC-32C(ext, int)[30:0]}, 0 = free */

/* What the owner register did with a packet (coflow_counter.p4) */
enum slot_outcome_t {
    SAME,       /* the slot's owner */
    TAKE,       /* an idle hashed slot, or an assigned slot of another coflow: taken over */
    CLAIM,      /* a free slot (an assigned one), claimed */
    COLLIDE     /* another coflow's busy hashed slot: shared, nothing changes */
}

/* A slot's owner and the clock at which it turns idle (its owner's last packet's clock + the
 * idle span, SLOT_CLOCK_EXPIRE): one stateful ALU word pair */
struct slot_state_t {
    tna_tag_t owner;
    bit<32>   expire;
}

/* The slot age clock's wrap count (coflow_counter.p4, SlotClock): the timestamp bits of the
 * last packet and the wraps seen so far, in clock units (a multiple of TNA_CLOCK_WRAP_STEP) */
struct clock_state_t {
    bit<32>   last_ts;
    bit<32>   wraps;
}
/* The digest of a report boundary crossing (control/report.p4) */
struct report_digest_t {
    tna_slot_t   slot;         /* the counter slot (meta.slot) */
    coflow_ext_t external_id;  /* the packet's CoflowId (a re-assigned slot's old coflow) */
    coflow_int_t internal_id;
    tna_units_t  units;        /* the slot's 64-byte units after the crossing packet */
    bit<16>      port;         /* the ingress port (the SDK's, 9 bits): its pipe (port[8:7]),
                                * which has its own copy of the slot's registers, is the
                                * controller's to derive (docs/explanation/queue-mapping.md) */
}

typedef bit<TNA_DCLAS_KEY_BITS> tna_dclas_key_t;
typedef bit<32> queue_idx_t;       /* port ++ prio, as v1model's per-queue counter index */

/* Ingress -> egress: the decided class, for the per-queue dequeue counter (egress
 * sees the physical queue id, not the class). */
header bridged_md_t {
    @padding bit<5> _pad;
    prio_t prio;
}

struct ingress_metadata_t {
    bridged_md_t    bridged;
    DropReason_t    drop_reason;
    bit<1>          other_9e;         /* first option has type 0x9e but length != 8 */
    bit<8>          other_9e_len;
    bit<1>          ck_tagged;        /* the CoflowId option is in the header (its checksum) */
    tna_port_t      ig_port;          /* ig_intr_md.ingress_port, as P4Runtime names it */
    PortRole_t      role;
    bit<1>          route_miss;       /* routing_v4 missed: DropReason_t.NO_ROUTE if nothing else */
    bit<1>          forward;          /* no drop after sanity and routing */
    bit<1>          decide;           /* forward, tagged, and decided here (coflow_tna.p4) */
    /* pipeline_config */
    Mode_t          mode;
    prio_t          fair_prio;
    tna_units_t     heavy_bytes;      /* in units, like the counters */
    coflow_ext_t    fifo_base;
    bit<1>          managed;          /* a controller is in charge: unregistered coflows last */
    bit<32>         ts_clock;         /* MAC timestamp[47:24], the clock's low bits */
    bit<32>         clock_wraps;      /* the clock's high bits (SlotClock) */
    bit<32>         epoch;            /* slot age clock: clock_wraps + ts_clock */
    bit<16>         l4_sport;
    bit<16>         l4_dport;
    /* ECMP (routing.p4): this switch's hash window, the selector's key */
    bit<8>          ecmp_shift;
    bit<32>         flow_hash;        /* CRC-32 of the 5-tuple */
    bit<16>         ecmp_key;         /* (bit<16>)(flow_hash >> ecmp_shift) */
    /* sanity: "a > b" as a |-| b != 0, operands of one size */
    bit<4>          ihl;              /* hdr.ipv4.ihl, copied by the parser */
    bit<16>         len_short;        /* IHL*4 |-| total_len: != 0 is malformed */
    bit<8>          opt_fit;          /* (IHL*4 - 20 + 1) |-| other_9e_len: 0 is malformed */
    /* coflow state */
    tna_slot_t      slot;
    bit<1>          slot_assigned;
    tna_tag_t       tag;
    bit<16>         ip_len;           /* total_len, at most TNA_MAX_COUNTED_IP_LEN (sanity.p4) */
    bit<16>         frame_bytes;      /* ip_len + 14 + half a unit (16 bits, as total_len) */
    bit<16>         len_units;        /* frame_bytes in units (the ALU widens it) */
    tna_units_t     bytes_before;
    bit<1>          slot_restart;     /* the slot's count restarted (taken or claimed) */
    bit<1>          report_on;        /* report_step hit: the slot reports crossings */
    tna_units_t     report_mask;      /* report_step's ~(step - 1), in units (report.p4) */
    tna_units_t     report_after;     /* units after this packet (report.p4's shadow count) */
    tna_units_t     report_cross;     /* (before ^ after) & mask: != 0 sends the digest */
    bit<16>         report_port;      /* the ingress port, for the digest */
    bit<32>         fifo_rank;        /* ext |-| fifo_base */
    tna_units_t     heavy_over;       /* bytes_before |-| heavy_bytes: != 0 is heavy */
    prio_t          prio;
    bit<1>          override_hit;
    prio_t          override_prio;
    bit<32>         meter_idx;
    bit<8>          color;
    bit<1>          meter_red;        /* RED at the flow meter: DropReason_t.METER_RED */
    queue_idx_t     queue_idx;
}

/* Egress parses Ethernet and the fixed IPv4 header only (options and payload pass as
 * payload): ECN marking rewrites the first IPv4 word. */
struct egress_headers_t {
    ethernet_t      ethernet;
    ipv4_t          ipv4;
}

struct egress_metadata_t {
    bridged_md_t    bridged;
    queue_idx_t     queue_idx;
    tna_port_t      eg_port;       /* eg_intr_md.egress_port, as P4Runtime names it */
    /* ECN marking's checksum update (RFC 1624 eqn. 3, parser.p4): ~HC and m' - m */
    bit<16>         ck_inv;        /* the one's complement of the incoming checksum */
    bit<16>         ecn_delta;     /* CE - the old ECN codepoint: 1 (ECT(0)) or 2 (ECT(1)) */
    bit<32>         ecn_threshold; /* ecn_port's threshold, in 80-byte cells */
    bit<32>         ecn_depth;     /* the queue's depth at enqueue in cells, then what exceeds
                                    * the threshold */
    bit<1>          ecn_on;        /* the port has an ecn_port entry */
    bit<1>          ecn_mark;      /* this packet was marked CE here */
}

#endif
