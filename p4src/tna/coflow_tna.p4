/*
 * coflow_tna.p4 -- in-network coflow scheduling on Tofino (TNA), the same
 * pipeline as p4src/coflow.p4 (v1model) with the same controller-facing names
 * (CoflowIngress.<control>.<table/action/counter/meter>). What differs, and
 * why, is listed in p4src/README.md, "Tofino (TNA)".
 *
 * Ingress: sanity -> config (port role, mode) -> routing (LPM + ActionSelector)
 *   tagged:   [edge, or unstamped] coflow byte counter (stateful ALUs) -> mode
 *             decision (fair / D-CLAS range / FIFO-LM), [fabric, stamped] the
 *             stamp's priority -> override -> [edge, rate mode] flow meter
 *   untagged: [edge] default class   [fabric] trust DSCP
 *   -> stamp (option + DSCP + TTL, qid) -> drops; checksum in the deparser.
 * Egress: per-queue dequeue counter from the bridged class -> ECN marking on the queue's depth.
 *
 * Layout after stratum/fabric-tna: one control per feature (include/control/),
 * sizes by name (include/size.p4 and the shared p4src/include/size.p4).
 * Build: make p4-tofino (mk/tofino.mk).
 */
#include <core.p4>
#include <tna.p4>

#include "../include/define.p4"
#include "../include/size.p4"
#include "include/size.p4"
#include "../include/header.p4"
#include "../include/slot_clock.p4"
#include "include/metadata.p4"
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

/* The TM's queue id in a container of its own. bf-p4c zero-initializes qid in routing_v4's
 * actions (stamp writes it under a condition) and, with routing two steps down the pipe
 * (the ECMP window), shared its container with meta.fair_prio, which the class decision
 * reads later: its own check then stops ("Compiler Bug: Metadata initialization analysis
 * incorrect. Live ranges between tbl_coflow_tna111 and routing_routing_v4 overlap"). */
@pa_no_overlay("ingress", "ig_intr_md_for_tm.qid")
control CoflowIngress(inout headers_t hdr,
                      inout ingress_metadata_t meta,
                      in ingress_intrinsic_metadata_t ig_intr_md,
                      in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                      inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                      inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Sanity() sanity;
    PipelineConfig() config;
    Routing() routing;
    CoflowCounter() coflow_counter;
    Report() report;
    Dclas() dclas;
    FifoLmDistance() fifo_distance;
    FifoLm() fifo_lm;
    Override() override;
    DefaultClass() default_class;
    FlowMeter() flow_meter;
    Stamp() stamp;
    IngressQueueStats() queue_stats;

    apply {
        /* Written for the stage budget (12): what needs only the header and the
         * configuration (routing, slot lookups, the FIFO-LM distance, the override
         * lookup, the stamp's constants) is applied unconditionally, so that table
         * placement runs it beside sanity; only state changes (registers, meters,
         * counters) and the class wait for the drop decision. */
        meta.prio = PRIO_LOWEST;
        meta.color = (bit<8>)MeterColor_t.GREEN;
        sanity.apply(hdr, meta, ig_prsr_md);
        config.apply(hdr, meta, ig_intr_md);
        routing.apply(hdr, meta, ig_tm_md);         /* a miss sets meta.route_miss */
        /* forward: no drop so far; decide: a tagged packet sanity passed is decided at an
         * edge port, or where no edge has decided yet (metadata bits: bf-p4c takes no bool
         * locals computed from several fields). decide leaves routing's miss out: routing
         * waits two steps for its ECMP window (routing.p4), and decide must not wait for it
         * (it gates the owner register, on the longest chain); each state change tests
         * route_miss == 0 itself, so an unrouted packet changes nothing, as on v1model. */
        if (meta.drop_reason == DropReason_t.NONE) {
            if (meta.route_miss == 0) {
                meta.forward = 1;
            }
            if (hdr.coflow_opt.isValid()
                && (meta.role == PortRole_t.EDGE || hdr.coflow_opt.stamped == 0)) {
                meta.decide = 1;
            }
        }
        if (hdr.coflow_opt.isValid()) {
            override.apply(hdr, meta);              /* lookup only: override_hit */
            fifo_distance.apply(hdr, meta);
        }
        coflow_counter.apply(hdr, meta);    /* counts only if decide */
        report.apply(hdr, meta, ig_dprsr_md);   /* digest_type on a report boundary */
        if (meta.decide == 1 && meta.route_miss == 0
            && meta.role == PortRole_t.EDGE && meta.mode == Mode_t.RATE) {
            flow_meter.apply(hdr, meta);            /* RED sets meta.meter_red */
        }

        if (meta.forward == 1 && hdr.coflow_opt.isValid()) {
            if (meta.override_hit == 1) {
                meta.prio = meta.override_prio;     /* the controller's class wins */
            } else if (meta.decide == 1 && meta.managed == 1 && meta.slot_assigned == 0) {
                /* a controller is in charge and did not register this coflow: served last
                 * in every mode (with no controller, Aalo's fallback below) */
                meta.prio = PRIO_LOWEST;
            } else if (meta.decide == 1 && meta.mode == Mode_t.DCLAS) {
                dclas.apply(hdr, meta);
            } else if (meta.decide == 1 && meta.mode == Mode_t.FIFO_LM) {
                fifo_lm.apply(hdr, meta);
            } else if (meta.decide == 1) {
                meta.prio = meta.fair_prio;         /* Mode_t.FAIR, Mode_t.RATE */
            } else {
                meta.prio = hdr.coflow_opt.prio;    /* trust the edge's stamp */
            }
        } else if (meta.forward == 1 && meta.role == PortRole_t.EDGE) {
            default_class.apply(hdr, meta);
        } else if (meta.forward == 1) {
            meta.prio = hdr.ipv4.dscp[5:3];         /* an edge stamped it */
        }
        /* the drop bits of routing and the meter become drop reasons at the end, so
         * that no earlier step waits for them */
        if (meta.drop_reason == DropReason_t.NONE) {
            if (meta.route_miss == 1) {
                meta.drop_reason = DropReason_t.NO_ROUTE;
            } else if (meta.meter_red == 1) {
                meta.drop_reason = DropReason_t.METER_RED;
            }
        }
        meta.queue_idx = (queue_idx_t)(ig_tm_md.ucast_egress_port ++ meta.prio);
        stamp.apply(hdr, meta, ig_tm_md);           /* counts queue_enq if not dropped */
        queue_stats.apply(hdr, meta, ig_dprsr_md);
    }
}

control CoflowEgress(inout egress_headers_t hdr,
                     inout egress_metadata_t meta,
                     in egress_intrinsic_metadata_t eg_intr_md,
                     in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                     inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                     inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    EgressQueueStats() queue_stats;
    EcnMarker() ecn_marker;

    apply {
        queue_stats.apply(meta, eg_intr_md);
        ecn_marker.apply(hdr, meta, eg_intr_md);
    }
}

Pipeline(CoflowIngressParser(),
         CoflowIngress(),
         CoflowIngressDeparser(),
         CoflowEgressParser(),
         CoflowEgress(),
         CoflowEgressDeparser()) pipe;

Switch(pipe) main;
