/*
 * size.p4 (TNA) -- the sizes that differ from v1model's (p4src/include/target_v1model.p4),
 * derived from the shared ones (p4src/include/size.p4). Python mirrors every name
 * (coflow.dataplane.constants, TNA_*); tests/test_constants.py compares them.
 *
 * Byte counters: a stateful ALU word is 32 bits, so the per-slot register counts
 * 2^TNA_BYTES_UNIT_SHIFT-byte units (64 B: up to 256 GiB a coflow, saturating),
 * each packet rounded to the nearest unit. The D-CLAS range key is a 20-bit slice
 * of it (a range key must fit 5 PHV nibbles): a quantum of 2^(6+12) = 256 KiB.
 */
#ifndef __SIZE_TNA__
#define __SIZE_TNA__

#ifndef TNA_HASH_SLOT_BITS                                  /* make p4-tofino-sweep sets it */
#define TNA_HASH_SLOT_BITS 15
#endif
#define TNA_HASH_SLOTS (1 << TNA_HASH_SLOT_BITS)            /* hashed slots (CRC-32) */
#define TNA_ASSIGNED_SLOTS TNA_HASH_SLOTS                   /* controller-assigned slots */
#define TNA_HASH_SLOT_BASE TNA_ASSIGNED_SLOTS               /* hashed slots follow them */
#define TNA_COFLOW_SLOTS (TNA_ASSIGNED_SLOTS + TNA_HASH_SLOTS)
#define TNA_SLOT_BITS (TNA_HASH_SLOT_BITS + 1)              /* slot index width */

/* Meters: the first TNA_METERED_SLOTS assigned slots (as many as v1model has) have
 * FLOW_SLOTS_PER_COFLOW meters each; coflows in higher slots are not metered. */
#define TNA_METERED_SLOTS 512
#define TNA_FLOW_METERS (TNA_METERED_SLOTS * FLOW_SLOTS_PER_COFLOW)
/* report_step (report.p4): as many slots report threshold crossings as v1model has assigned
 * slots (the metered ones, 0..2^TNA_REPORT_SLOT_BITS - 1: report.p4 tests the slot's high bits);
 * ig_dprsr_md.digest_type of a report (3 bits, 0 = none) */
#define TNA_REPORT_SLOT_BITS 9
#define TNA_REPORT_TABLE_SIZE (1 << TNA_REPORT_SLOT_BITS)
#define TNA_REPORT_DIGEST_TYPE 1

#define TNA_BYTES_UNIT_SHIFT 6                              /* register unit: 64 bytes */
#define TNA_DCLAS_KEY_SHIFT 12                              /* range key = units[31:12] */
#define TNA_DCLAS_KEY_BITS (32 - TNA_DCLAS_KEY_SHIFT)
#define ETH_HEADER_BYTES 14                                 /* frame bytes = total_len + 14 */

#define TNA_UNITS_MAX 0xffffffff                         /* a saturated byte register */
/* Slot age clock (coflow_counter.p4, config.p4, p4src/include/slot_clock.p4): 32 bits of
 * 2^30 ns (1.074 s; v1model's epochs are 1.049 s), the top 18 bits of the 48-bit ingress MAC
 * timestamp (which wraps every 2^48 ns = 78 h) plus a count of those wraps, kept by a one-entry
 * register: the clock wraps every 2^62 ns (146 years), and ages compare in serial-number
 * arithmetic, exact up to 2^31 units (73 years). The idle age is SLOT_IDLE_EPOCHS units: a slot
 * idle for 7.5 to 8.6 s is taken over. */
#define TNA_EPOCH_SHIFT 30                                  /* clock unit: 2^30 ns */
#define TNA_CLOCK_TS_BITS 18                                /* timestamp bits in the clock */
#define TNA_CLOCK_WRAP_STEP (1 << TNA_CLOCK_TS_BITS)        /* one timestamp wrap in clock units */
/* A packet's count in the byte registers is its IPv4 total length, at most this (the MTU):
 * ingress has no frame length to check total_len against (README, "What a host can gain by
 * lying"), so a frame claiming more than the MTU is counted as an MTU-sized one. */
#define TNA_MAX_COUNTED_IP_LEN 1500
#define TNA_DROP_CTL 1                                      /* drop_ctl bit 0: drop */
/* Bytes the Tofino MAC and traffic manager count beyond the Ethernet header and payload: the
 * 4-byte FCS (counters, meters; the controller's payload conversion, coflow.tofino.target) */
#define TNA_COUNTED_FCS_BYTES 4
/* ECN: Tofino 1 queue depths are in 80-byte cells (set_vq.threshold_level is in cells here) */
#define TNA_CELL_BYTES 80
#define IPV4_MIN_HEADER_BYTES 20
#define IPV4_OPT_MIN_LEN 2                                  /* type + length */

#define TNA_ECMP_HASH_BITS 16                               /* selector hash: IDENTITY of the window */
#define TNA_ECMP_MAX_GROUP_SIZE 64
#define TNA_ECMP_GROUPS (ECMP_SELECTOR_SIZE / TNA_ECMP_MAX_GROUP_SIZE)

#endif
