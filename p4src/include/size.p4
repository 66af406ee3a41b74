/*
 * size.p4 -- every table, register, counter and meter size, by name, that both
 * targets share. The sizes that differ per target (slot counts, meters, the
 * ECMP hash) are in target_v1model.p4 and p4src/tna/include/size.p4.
 */
#ifndef __SIZE__
#define __SIZE__

#define MAX_PORTS 512                 /* port_t is bit<9> */
#define NUM_PRIOS 8                   /* --priority-queues 8 */
#define QUEUE_COUNTER_SIZE (MAX_PORTS * NUM_PRIOS)   /* index = port * NUM_PRIOS + prio */
#define DROP_REASONS 16

#define PORT_ROLE_TABLE_SIZE 64
#define ECN_PORT_TABLE_SIZE 64         /* egress ports with ECN marking (ecn_marker.p4) */
#define ROUTING_TABLE_SIZE 1024
#define ECMP_SELECTOR_SIZE 1024       /* action-profile members */

#define OVERRIDE_TABLE_SIZE 1024
#define DCLAS_TABLE_SIZE 16           /* K <= 8 ranges, room for two sets during updates */
#define UNTAGGED_CLASS_TABLE_SIZE 64

#define FLOW_SLOTS_PER_COFLOW 8        /* meters per assigned slot: sizes the per-flow meter pool (FLOW_METERS) */

#endif
