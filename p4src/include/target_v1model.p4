/*
 * target_v1model.p4 -- the constants and sizes only the v1model program uses.
 * The TNA program (p4src/tna/) has its own (p4src/tna/include/size.p4); the
 * target-neutral ones stay in define.p4 and size.p4. Every name and value here
 * is what define.p4 / size.p4 held before the split.
 */
#ifndef __TARGET_V1MODEL__
#define __TARGET_V1MODEL__

/* Slot hash (v1model): multiplicative (Fibonacci) hashing of (external, internal). */
const bit<32> HASH_MUL_EXT = 0x9E3779B1;  /* 2^32 / golden ratio */
const bit<32> HASH_MUL_INT = 0x85EBCA77;

/* v1model meter colours (TNA: MeterColor_t, RED = 3) */
const bit<2> METER_GREEN  = 0;
const bit<2> METER_YELLOW = 1;
const bit<2> METER_RED    = 2;

#define ECMP_HASH_WIDTH 32            /* crc32 over the 5-tuple */

/* Slot age clock: standard_metadata.ingress_global_timestamp counts microseconds since the
 * switch started; >> 20 makes an epoch 1.048576 s (epoch_t wraps after 2^16 epochs, ~19 h). */
#define EPOCH_SHIFT 20

#define ASSIGNED_SLOTS 512            /* slots 0..511: controller-assigned (coflow_slot table) */
#define HASH_SLOT_BITS 9
#define HASH_SLOTS (1 << HASH_SLOT_BITS)          /* hash(ext, int) fallback slots */
#define HASH_SLOT_BASE ASSIGNED_SLOTS             /* they follow the assigned ones */
#define COFLOW_SLOTS (ASSIGNED_SLOTS + HASH_SLOTS) /* byte-counter slots: registers + mirror counter */
#define COFLOW_SLOT_TABLE_SIZE ASSIGNED_SLOTS

/* report_step (report.p4): one entry per controller-assigned slot */
#define REPORT_TABLE_SIZE COFLOW_SLOT_TABLE_SIZE
#define REPORT_DIGEST_RECEIVER 1     /* v1model digest receiver (BMv2's learn list id) */

#define FLOW_METERS (ASSIGNED_SLOTS * FLOW_SLOTS_PER_COFLOW)
#define FLOW_METER_TABLE_SIZE FLOW_METERS

#endif
