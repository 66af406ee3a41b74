/*
 * size.p4 -- every table, register, counter and meter size, by name.
 */
#ifndef __SIZE__
#define __SIZE__

#define MAX_PORTS 512                 /* port_t is bit<9> */
#define NUM_PRIOS 8                   /* --priority-queues 8 */
#define QUEUE_COUNTER_SIZE (MAX_PORTS * NUM_PRIOS)   /* index = port * NUM_PRIOS + prio */
#define DROP_REASONS 16

#define PORT_ROLE_TABLE_SIZE 64
#define ROUTING_TABLE_SIZE 1024
#define ECMP_SELECTOR_SIZE 1024       /* action-profile members */
#define ECMP_HASH_WIDTH 32            /* crc32 over the 5-tuple */

#define ASSIGNED_SLOTS 512            /* slots 0..511: controller-assigned (coflow_slot table) */
#define HASH_SLOT_BITS 9
#define HASH_SLOTS (1 << HASH_SLOT_BITS)          /* hash(ext, int) fallback slots */
#define HASH_SLOT_BASE ASSIGNED_SLOTS             /* they follow the assigned ones */
#define COFLOW_SLOTS (ASSIGNED_SLOTS + HASH_SLOTS) /* byte-counter slots: registers + mirror counter */
#define COFLOW_SLOT_TABLE_SIZE ASSIGNED_SLOTS
#define OVERRIDE_TABLE_SIZE 1024
#define DCLAS_TABLE_SIZE 16           /* K <= 8 ranges, room for two sets during updates */
#define UNTAGGED_CLASS_TABLE_SIZE 64

#define FLOW_SLOTS_PER_COFLOW 8
#define FLOW_METERS (ASSIGNED_SLOTS * FLOW_SLOTS_PER_COFLOW)
#define FLOW_METER_TABLE_SIZE FLOW_METERS

#endif
