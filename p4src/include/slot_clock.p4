/*
 * slot_clock.p4 -- the slot age clock's arithmetic, shared by the Tofino program
 * (tna/include/control/config.p4 and coflow_counter.p4, inside stateful ALUs) and the v1model
 * harness p4src/test/slot_clock_harness.p4, which tests/test_slot_clock_bmv2.py drives on
 * simple_switch. Macros, not functions: a stateful ALU's body must hold the expressions
 * themselves.
 *
 * The clock is 32 bits: a timestamp's low bits (`ts`, fewer than 31 bits) plus a count of that
 * timestamp's wraps kept in a register {last, wraps}, `step` = one wrap in clock units.
 *
 * SLOT_CLOCK_TICK(last, wraps, ts, step, count): the register's update for a packet whose
 * timestamp bits are `ts`; `count` gets the wrap count before the update, and the packet's clock
 * is count + ts. Timestamps reach the register out of order (Tofino stamps each port's packets
 * on arrival and the ports' packets merge later), so a small step back is not a wrap: `ts` is
 * read as the timestamp nearest `last` modulo `step` (serial-number arithmetic, RFC 1982):
 *  - a drop of at least half the timestamp's range is a wrap: wraps + step, last = ts;
 *  - a rise of more than half its range is a late packet from before the last wrap: nothing
 *    changes (`last` stays past the wrap);
 *  - anything else is the same period, whichever way it went: last = ts.
 * The count returned is the one before the update (the stored word, read before the ALUs
 * write it, as bf-p4c reads `mem_hi`; an ALU result that no instruction drove reads 0, so the
 * updated count is not used): the first packet past a wrap gets a clock one step behind its
 * own, and a late packet one step ahead; every other packet gets its own. The register starts
 * at {step / 2 - 1, 0}, so that a first packet anywhere in the range is in the same period.
 * Written so that no P4 subtraction wraps (ts and last are below 2^31 - step / 2): the P4 value
 * of each compare is the exact one bf-p4c's stateful ALU computes ("geq.u"/"leq.u", which
 * compare the exact sum without wrapping; p4c backends/tofino/bf-p4c/mau/stateful_alu.cpp,
 * CreateSaluInstruction::preorder(Relation)).
 *
 * SLOT_CLOCK_EXPIRE(now, span) and SLOT_CLOCK_IDLE(now, expire): a slot keeps, instead of
 * the clock when its owner was last seen, the clock at which it turns idle (expire = seen + span,
 * modulo 2^32), and is idle when expire - now, as a 32-bit two's complement number, is not
 * positive: serial-number arithmetic, so ages are exact up to 2^31 - span units, and a clock
 * that wraps modulo 2^32 (or a count of wraps that went wrong) leaves no slot busy for longer
 * than its span past the clock's own error. A stateful ALU takes one binary operator per
 * expression (bf-p4c refuses `now - seen - span`: same file, checkAndReportComplexInstruction),
 * hence the stored expiry. bf-p4c compiles a signed relation between a difference at the ALU's
 * width and 0 into a "uus" compare, the sign of that 32-bit difference (same file,
 * can_be_uus_cmp): the P4 value.
 */
#ifndef __SLOT_CLOCK__
#define __SLOT_CLOCK__

#define SLOT_CLOCK_TICK(last, wraps, ts, step, count)               \
    count = wraps;                                                  \
    if ((last) >= (ts) + ((step) >> 1)) {                           \
        wraps = wraps + (step);                                     \
        last = ts;                                                  \
    } else if ((ts) <= (last) + ((step) >> 1)) {                    \
        last = ts;                                                  \
    }

#define SLOT_CLOCK_EXPIRE(now, span) ((now) + (span))

#define SLOT_CLOCK_IDLE(now, expire) ((int<32>)(expire) - (int<32>)(now) <= 0)

#endif
