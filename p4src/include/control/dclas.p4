/*
 * dclas.p4 -- Aalo D-CLAS ([AALO] section 4.2): the bytes a coflow has sent
 * before this packet select its queue through a range table. The controller
 * installs DclasParams(K=8).ranges() mapped with hw_priority(): Aalo queue 1
 * (bytes < Q1) is priority 7, queue 8 is priority 0. With no entry every
 * coflow stays in the highest queue.
 */
#ifndef __DCLAS__
#define __DCLAS__

control Dclas(inout headers_t hdr,
              inout local_metadata_t meta,
              inout standard_metadata_t std_meta) {

    action set_queue(prio_t prio) {
        meta.prio = prio;
    }

    table dclas_thresholds {
        key = { meta.bytes_before: range @name("bytes"); }
        actions = { set_queue; }
        default_action = set_queue(PRIO_HIGHEST);
        size = DCLAS_TABLE_SIZE;
    }

    apply {
        dclas_thresholds.apply();
    }
}

#endif
