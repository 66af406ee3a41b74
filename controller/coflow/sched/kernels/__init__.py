"""Compiled inner loops (numba) of the rate computations and the simulator's event step, one
module per algorithm. They are the hot paths of :mod:`coflow.sched.primitives`, the schedulers and
:mod:`coflow.sim`: loops over flows or links that numpy would do in many passes with temporaries.
Each kernel is the only implementation of its step; the modules above call it. The simulator's
PFP event loop lives beside the simulator (:mod:`coflow.sim_pfp`).
"""
from .waterfill import INF, Flows, fill, fill_unit, greedy_fill, ordered_fill, pair_levels, pair_levels_unit, waterfill_links  # noqa: F401
from .madd import link_demand, madd_coflows, segment_sum  # noqa: F401
from .step import ActiveFlows, advance_compact, check_rates, coflow_finish_in  # noqa: F401
from .queues import Counts, Demotion, QueueShare, dclas_demotion_times, dense_sync, fai_share_realloc, fai_static_init, group_fill, queue_fill, queue_fill_slots  # noqa: F401
from .hug import hug_fill, hug_fill_dense, hug_prepare  # noqa: F401
from .pfp import Counter, FlowState, Matching, matching, pfp_buffers, pfp_rates, pfp_settle  # noqa: F401
