/*
 * dclas.p4 (TNA) -- Aalo D-CLAS as on v1model (p4src/include/control/dclas.p4),
 * on a quantised key: a range key must be narrow on Tofino, so the table
 * matches bytes_before[31:TNA_DCLAS_KEY_SHIFT] (units of 2^(6+12) bytes =
 * 256 KiB). The controller rounds each threshold to the nearest quantum
 * (coflow.tofino.target.dclas_ranges); thresholds past the key's range
 * (256 GiB) are unreachable.
 */
#ifndef __DCLAS_TNA__
#define __DCLAS_TNA__

control Dclas(inout headers_t hdr,
              inout ingress_metadata_t meta) {

    action set_queue(prio_t prio) {
        meta.prio = prio;
    }

    table dclas_thresholds {
        key = { meta.bytes_before[31:TNA_DCLAS_KEY_SHIFT]: range @name("bytes"); }
        actions = { set_queue; }
        default_action = set_queue(PRIO_HIGHEST);
        size = DCLAS_TABLE_SIZE;
    }

    apply {
        dclas_thresholds.apply();
    }
}

#endif
