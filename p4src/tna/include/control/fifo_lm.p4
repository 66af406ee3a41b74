/*
 * fifo_lm.p4 (TNA) -- Baraat FIFO-LM as on v1model (p4src/include/control/fifo_lm.p4):
 * rank = min(ext - fifo_base, 6) (0 for older ids), one more (up to 6) when the
 * coflow is heavy (bytes before > heavy_bytes), priority 7 - rank.
 *
 * In two controls, so that table placement can run the first early (it needs the
 * header and the pipeline config only) and the second right after the byte
 * counter:
 *  - FifoLmDistance: distance = ext |-| fifo_base (the ALU's saturating subtract);
 *  - FifoLm: heavy = bytes_before |-| heavy_bytes != 0, then the class from a
 *    constant ternary table on (distance, heavy). The cap at 6 and the "+1 if
 *    heavy" are entries of that table, and the class is action data, not
 *    arithmetic on the rank: a move from the 32-bit rank into the 3-bit class
 *    would tie the class, and every field it is copied to (DSCP, the option's
 *    prio, qid, the bridged class), to the rank's 32-bit container group, which
 *    PHV allocation cannot satisfy.
 */
#ifndef __FIFO_LM_TNA__
#define __FIFO_LM_TNA__

control FifoLmDistance(inout headers_t hdr,
                       inout ingress_metadata_t meta) {

    action distance() {
        meta.fifo_rank = hdr.coflow_opt.external_id |-| meta.fifo_base;
    }

    @hidden table t_distance {
        actions = { distance; }
        const default_action = distance();
        size = 1;
    }

    apply {
        t_distance.apply();
    }
}

control FifoLm(inout headers_t hdr,
               inout ingress_metadata_t meta) {

    action heavy() {
        meta.heavy_over = meta.bytes_before |-| meta.heavy_bytes;
    }

    @hidden table t_heavy {
        actions = { heavy; }
        const default_action = heavy();
        size = 1;
    }

    action set_prio(prio_t prio) {
        meta.prio = prio;
    }

    /* (distance, heavy_over) -> PRIO_HIGHEST - min(distance + heavy, FIFO_LM_MAX_RANK);
     * the first matching entry wins. FIFO_LM_MAX_RANK is 6 (tests/test_constants.py). */
    @hidden table t_rank_prio {
        key = {
            meta.fifo_rank: ternary;
            meta.heavy_over: ternary;
        }
        actions = { set_prio; }
        const entries = {
            (0, 0) : set_prio(PRIO_HIGHEST);
            (1, 0) : set_prio(PRIO_HIGHEST - 1);
            (2, 0) : set_prio(PRIO_HIGHEST - 2);
            (3, 0) : set_prio(PRIO_HIGHEST - 3);
            (4, 0) : set_prio(PRIO_HIGHEST - 4);
            (5, 0) : set_prio(PRIO_HIGHEST - 5);
            (0, _) : set_prio(PRIO_HIGHEST - 1);     /* heavy: one rank lower */
            (1, _) : set_prio(PRIO_HIGHEST - 2);
            (2, _) : set_prio(PRIO_HIGHEST - 3);
            (3, _) : set_prio(PRIO_HIGHEST - 4);
            (4, _) : set_prio(PRIO_HIGHEST - 5);
        }
        const default_action = set_prio(PRIO_HIGHEST - FIFO_LM_MAX_RANK);
        size = 16;
    }

    apply {
        t_heavy.apply();
        t_rank_prio.apply();
    }
}

#endif
