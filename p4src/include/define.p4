/*
 * define.p4 -- types, constants and encodings shared by every control.
 *
 * The CoflowId IPv4 option, the queue <-> priority mapping and the DSCP
 * stamp are documented in p4src/README.md; the scapy layer in
 * controller/coflow/dataplane/packet.py mirrors the constants below.
 *
 * Target-neutral: shared by the v1model program and the TNA one (p4src/tna/).
 * What only v1model uses (its slot hash multipliers, its meter colours) is in
 * target_v1model.p4.
 */
#ifndef __DEFINE__
#define __DEFINE__

typedef bit<9>  port_t;
typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<3>  prio_t;        /* standard_metadata.priority: 7 is served first */
typedef bit<32> coflow_ext_t;  /* Aalo external id (job / DAG) */
typedef bit<8>  coflow_int_t;  /* Aalo internal id (stage in the DAG) */
typedef bit<48> coflow_tag_t;  /* {8w1, ext, int}: slot-owner tag, 0 = free */
typedef bit<64> bytes_t;
#define EPOCH_BITS 16
typedef bit<EPOCH_BITS> epoch_t;  /* slot age clock: ingress timestamp >> EPOCH_SHIFT, mod 2^16 */

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IP_PROTO_TCP = 6;
const bit<8>  IP_PROTO_UDP = 17;

/* CoflowId option: copied=1, class=0, number=30 (RFC 4727 experimental). */
const bit<8>  IPOPT_COFLOW_TYPE = 0x9e;
const bit<8>  IPOPT_COFLOW_LEN  = 8;

/* Serializable enums (issue 21): the values are the P4Runtime encoding and the Python
 * IntEnums of coflow.dataplane.constants (P4Mode, PortRole, DropReason; tests/test_constants.py
 * compares members and values). Action parameters stay bit<N> (an enum-typed parameter would
 * change the P4Info) and are cast to the enum in the action. */

/* Scheduling modes, written by the controller into pipeline_config (set_config's bit<8> mode). */
enum bit<8> Mode_t {
    FAIR    = 0,  /* every tagged coflow in one class (fair_prio)   */
    DCLAS   = 1,  /* Aalo D-CLAS: bytes sent -> queue (range table) */
    FIFO_LM = 2,  /* Baraat FIFO-LM: FIFO by external id, heavy ones multiplexed */
    RATE    = 3   /* Varys: meters enforce MADD/HUG rates, fair_prio class */
}

/* Port roles (port_role's set_role, bit<1>): an edge port faces a host (traffic enters the
 * fabric there). */
enum bit<1> PortRole_t {
    FABRIC = 0,
    EDGE   = 1
}

const prio_t PRIO_HIGHEST = 7;   /* Aalo queue 1 */
const prio_t PRIO_LOWEST  = 0;   /* Aalo queue 8 */
const prio_t FIFO_LM_MAX_RANK = 6; /* FIFO-LM uses priorities 7..1 (ranks 0..6) */

/* Slot lifecycle (coflow_counter.p4): a hashed slot whose owner sent nothing for at least
 * this many epochs (~1 s each; EPOCH_SHIFT is per target) is taken over by the next coflow
 * that hashes to it. The default of pipeline_config; the controller may write another. */
const epoch_t SLOT_IDLE_EPOCHS = 8;

/* Drop reasons: index of the drop_reasons counter (cast to bit<8> to count). */
enum bit<8> DropReason_t {
    NONE         = 0,
    NOT_IPV4     = 1,   /* EtherType is not IPv4 */
    BAD_VERSION  = 2,   /* EtherType IPv4 but version != 4 */
    BAD_IHL      = 3,   /* IHL < 5 */
    TRUNCATED    = 4,   /* parser ran out of bytes (truncated header/option) */
    OPT_LEN      = 5,   /* type 0x9e, length < 2 or past the options area */
    OPT_OVERFLOW = 6,   /* option does not fit inside IHL */
    TOTAL_LEN    = 7,   /* totalLen < IHL*4 or frame shorter than totalLen */
    TTL          = 8,   /* TTL <= 1 */
    NO_ROUTE     = 9,   /* LPM miss */
    METER_RED    = 10,  /* flow meter coloured the packet RED */
    PARSER_OTHER = 11   /* any other parser error */
}

/* IPv4 ECN field (RFC 3168): ECT(0) = 2 and ECT(1) = 1 are ECN-capable; CE = 3 is a mark */
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_CE      = 3;

#endif
