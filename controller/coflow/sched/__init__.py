"""The scheduler core: one implementation of every scheduler, shared by all drivers.

Import a scheduler by name with :func:`make_scheduler`; :data:`REGISTRY` lists them.
"""
from .base import REGISTRY, Allocation, Scheduler, View, make_scheduler, params_dict  # noqa: F401
from . import flowlevel, ordered, queues, isolation  # noqa: F401  (registration side effects)

NAMES = sorted(REGISTRY)
