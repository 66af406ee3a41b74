/*
 * size.p4 -- every table, register, counter and meter size, by name.
 */
#ifndef __SIZE__
#define __SIZE__

#define MAX_PORTS 512                 /* port_t is bit<9> */
#define NUM_PRIOS 8                   /* --priority-queues 8 */
#define QUEUE_COUNTER_SIZE 4096       /* MAX_PORTS * NUM_PRIOS: index = port*8 + prio */
#define DROP_REASONS 16

#define PORT_ROLE_TABLE_SIZE 64
#define ROUTING_TABLE_SIZE 1024
#define ECMP_SELECTOR_SIZE 1024       /* action-profile members */
#define ECMP_HASH_WIDTH 32            /* crc32 over the 5-tuple */

#define COFLOW_SLOTS 1024             /* byte-counter slots: registers + mirror counter */
#define ASSIGNED_SLOTS 512            /* slots 0..511: controller-assigned (coflow_slot table) */
#define HASH_SLOT_BASE 512            /* slots 512..1023: hash(ext,int) fallback */
#define HASH_SLOTS 512
#define HASH_SLOT_BITS 9              /* HASH_SLOTS = 2^HASH_SLOT_BITS */
#define COFLOW_SLOT_TABLE_SIZE 512
#define OVERRIDE_TABLE_SIZE 1024
#define DCLAS_TABLE_SIZE 16           /* K <= 8 ranges, room for two sets during updates */
#define UNTAGGED_CLASS_TABLE_SIZE 64

#define FLOW_SLOTS_PER_COFLOW 8
#define FLOW_METERS 4096              /* ASSIGNED_SLOTS * FLOW_SLOTS_PER_COFLOW */
#define FLOW_METER_TABLE_SIZE 4096

#endif
