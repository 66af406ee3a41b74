/*
 * coflow.p4 -- in-network coflow scheduling for BMv2 simple_switch_grpc
 * (v1model, started with --priority-queues 8).
 *
 * Ingress: sanity -> config (port role, mode) -> routing (LPM + ECMP) ->
 *   tagged:   [edge] coflow byte counter (+ digest on a report boundary) -> mode decision (fair/dclas/fifo-lm/rate;
 *             a coflow the controller did not register: the lowest class)
 *             [fabric, stamped] the stamp's priority
 *             -> override -> [edge] flow meter
 *   untagged: [edge] default class   [fabric] trust DSCP
 *   -> stamp (option + DSCP + TTL + checksum) -> queue stats / drops.
 * Egress: per-queue dequeue counter -> ECN marking on the port's (virtual) queue depth.
 * See README.md for the packet encoding and the queue mapping.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/define.p4"
#include "include/size.p4"
#include "include/target_v1model.p4"
#include "include/header.p4"
#include "include/parser.p4"
#include "include/control/sanity.p4"
#include "include/control/config.p4"
#include "include/control/routing.p4"
#include "include/control/coflow_counter.p4"
#include "include/control/report.p4"
#include "include/control/dclas.p4"
#include "include/control/fifo_lm.p4"
#include "include/control/override.p4"
#include "include/control/default_class.p4"
#include "include/control/flow_meter.p4"
#include "include/control/stamp.p4"
#include "include/control/queue_stats.p4"
#include "include/control/ecn_marker.p4"

control CoflowIngress(inout headers_t hdr,
                      inout local_metadata_t meta,
                      inout standard_metadata_t std_meta) {
    Sanity() sanity;
    PipelineConfig() config;
    Routing() routing;
    CoflowCounter() coflow_counter;
    Report() report;
    Dclas() dclas;
    FifoLm() fifo_lm;
    Override() override;
    DefaultClass() default_class;
    FlowMeter() flow_meter;
    Stamp() stamp;
    IngressQueueStats() queue_stats;

    apply {
        /* BMv2 zeroes metadata per packet: meta.prio starts at 0 (PRIO_LOWEST). One step per
         * line, each guarded by what it needs (fabric-tna's layout): a packet dropped by a
         * step goes on to the queue statistics only. */
        sanity.apply(hdr, meta, std_meta);
        if (meta.drop_reason == DropReason_t.NONE) {
            config.apply(hdr, meta, std_meta);
            routing.apply(hdr, meta, std_meta);     /* may set DropReason_t.NO_ROUTE */
        }
        bool forward = meta.drop_reason == DropReason_t.NONE;
        bool tagged = forward && hdr.coflow_opt.isValid();
        /* A tagged packet is decided at an edge port, or where no edge has decided yet. */
        bool decide = tagged && (meta.role == PortRole_t.EDGE || hdr.coflow_opt.stamped == 0);

        if (decide) {
            coflow_counter.apply(hdr, meta, std_meta);
            report.apply(hdr, meta, std_meta);    /* a digest on a report boundary */
        }
        if (decide && meta.managed == 1 && meta.slot_assigned == 0) {
            /* A controller is in charge and did not register this coflow (no coflow_slot
             * entry): it is served last in every mode, never above a registered coflow.
             * With no controller (managed == 0) Aalo's fallback below applies instead. */
            meta.prio = PRIO_LOWEST;
        } else if (decide && meta.mode == Mode_t.DCLAS) {
            dclas.apply(hdr, meta, std_meta);
        } else if (decide && meta.mode == Mode_t.FIFO_LM) {
            fifo_lm.apply(hdr, meta, std_meta);
        } else if (decide) {
            meta.prio = meta.fair_prio;           /* Mode_t.FAIR, Mode_t.RATE */
        } else if (tagged) {
            meta.prio = hdr.coflow_opt.prio;      /* trust the edge's stamp */
        }
        if (tagged) {
            override.apply(hdr, meta, std_meta);
        }
        if (tagged && meta.role == PortRole_t.EDGE && meta.mode == Mode_t.RATE) {
            flow_meter.apply(hdr, meta, std_meta);   /* may set DropReason_t.METER_RED */
        }
        if (forward && !tagged && meta.role == PortRole_t.EDGE) {
            default_class.apply(hdr, meta, std_meta);
        } else if (forward && !tagged) {
            meta.prio = hdr.ipv4.dscp[5:3];       /* an edge stamped it */
        }
        if (meta.drop_reason == DropReason_t.NONE) {
            stamp.apply(hdr, meta, std_meta);     /* also sets std_meta.priority */
        }
        queue_stats.apply(hdr, meta, std_meta);
    }
}

control CoflowEgress(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t std_meta) {
    EgressQueueStats() queue_stats;
    EcnMarker() ecn_marker;

    apply {
        queue_stats.apply(hdr, meta, std_meta);
        ecn_marker.apply(hdr, meta, std_meta);
    }
}

V1Switch(CoflowParser(),
         CoflowVerifyChecksum(),
         CoflowIngress(),
         CoflowEgress(),
         CoflowComputeChecksum(),
         CoflowDeparser()) main;
