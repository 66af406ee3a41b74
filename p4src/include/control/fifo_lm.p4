/*
 * fifo_lm.p4 -- Baraat FIFO-LM on 8 strict-priority queues.
 *
 * Coflows are served FIFO by external id: rank = ext - fifo_base (fifo_base
 * is the oldest active coflow, written by the controller into
 * pipeline_config). Rank r is served at priority 7 - r, so the head coflow
 * (rank 0) has priority 7 and blocks the ones behind it, as FIFO requires.
 * A heavy coflow (locally seen bytes > heavy_bytes) moves down one rank, into
 * the queue of the coflow behind it, where the two share one FIFO queue
 * (limited multiplexing) instead of the heavy one blocking it.
 * Ranks saturate at 6: coflows 6 or more behind the head share priority 1;
 * priority 0 is left for untagged background traffic.
 */
#ifndef __FIFO_LM__
#define __FIFO_LM__

control FifoLm(inout headers_t hdr,
               inout local_metadata_t meta,
               inout standard_metadata_t std_meta) {

    apply {
        coflow_ext_t ext = hdr.coflow_opt.external_id;
        bit<32> rank = 0;
        if (ext > meta.fifo_base) {
            rank = ext - meta.fifo_base;
        }
        if (rank > (bit<32>)FIFO_LM_MAX_RANK) {
            rank = (bit<32>)FIFO_LM_MAX_RANK;
        }
        if (meta.bytes_before > meta.heavy_bytes && rank < (bit<32>)FIFO_LM_MAX_RANK) {
            rank = rank + 1;
        }
        meta.prio = PRIO_HIGHEST - (prio_t)rank;
    }
}

#endif
