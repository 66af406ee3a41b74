"""The scheduler core: one implementation of every scheduler, shared by all drivers.

Import a scheduler by name with :func:`make_scheduler`; :data:`REGISTRY` lists them.  Every
module of this package registers its schedulers when imported here: the four families first
(their order is the registry's), then any other module, by name, so that a new scheduler is
one new file (docs/how-to/add-a-scheduler.md).
"""
import importlib
import pkgutil

from .base import REGISTRY, Allocation, Scheduler, View, make_scheduler, params_dict  # noqa: F401
from . import flowlevel, ordered, queues, isolation  # noqa: F401  (registration side effects)

#: modules here that hold no scheduler (the model and registry, the shared primitives, the lists
#: derived from the declarations)
_NOT_SCHEDULERS = ("base", "primitives", "deploy")
for _m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _m.ispkg and _m.name not in _NOT_SCHEDULERS:
        importlib.import_module(f"{__name__}.{_m.name}")

NAMES = sorted(REGISTRY)
