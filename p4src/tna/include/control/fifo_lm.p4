/*
 * fifo_lm.p4 (TNA) -- Baraat FIFO-LM as on v1model (p4src/include/control/fifo_lm.p4):
 * rank = min(ext - fifo_base, 6) (0 for older ids), one more (up to 6) when the
 * coflow is heavy, priority 7 - rank. Written with the ALU's saturating
 * subtract, min and max: "bytes > heavy" is max(bytes, heavy) != heavy.
 */
#ifndef __FIFO_LM_TNA__
#define __FIFO_LM_TNA__

control FifoLm(inout headers_t hdr,
               inout ingress_metadata_t meta) {

    /* one ALU operation per field per action: the rank's subtract and its cap in two steps */
    action distance() {
        meta.fifo_rank = hdr.coflow_opt.external_id |-| meta.fifo_base;
        meta.heavy_max = max(meta.bytes_before, meta.heavy_bytes);
    }

    @hidden table t_distance {
        actions = { distance; }
        const default_action = distance();
        size = 1;
    }

    apply {
        t_distance.apply();
        meta.fifo_rank = min(meta.fifo_rank, (bit<32>)FIFO_LM_MAX_RANK);
        if (meta.heavy_max != meta.heavy_bytes && meta.fifo_rank != (bit<32>)FIFO_LM_MAX_RANK) {
            meta.fifo_rank = meta.fifo_rank + 1;
        }
        meta.prio = PRIO_HIGHEST - (prio_t)meta.fifo_rank;
    }
}

#endif
