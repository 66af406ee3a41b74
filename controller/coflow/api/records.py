"""What the registry holds and the API speaks (:mod:`coflow.api.registry`'s model): the errors, the
CoflowId allocation rule (:class:`CidAllocator`, shared with the simulator's runtime dynamics),
flows and coflow records, and the API's limits.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..dataplane.constants import MAX_EXTERNAL, MAX_INTERNAL, CoflowId, CoflowIdError


EXTERNAL_LIMIT = MAX_EXTERNAL + 1   # external id < 2^32 (the option's 32-bit field)
INTERNAL_LIMIT = MAX_INTERNAL + 1   # internal id < 2^8 (8-bit field)
SIZE_LIMIT = 2 ** 63       # int64 on the wire
DB_FORMAT = "coflow-registry/1"
EVENTS = ("register", "add_flows", "update", "unregister")

_CODES = {"INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED",
          "PERMISSION_DENIED", "UNAUTHENTICATED"}
#: longest lease a coflow may ask for (seconds) and longest client request id (characters)
MAX_LEASE_S = 86400.0
MAX_REQUEST_ID = 128


class ApiError(Exception):
    """A rejected request. ``code``: gRPC status name; ``field``: the request field it concerns."""

    def __init__(self, code: str, field: str, message: str):
        assert code in _CODES, code
        super().__init__(f"{field}: {message}")
        self.code, self.field, self.message = code, field, message

    @property
    def details(self) -> str:
        return f"{self.field}: {self.message}"


class RegistryDbError(ValueError):
    """The registry database cannot be used (not SQLite, not ours, inconsistent, locked)."""


def _invalid(field: str, message: str) -> ApiError:
    return ApiError("INVALID_ARGUMENT", field, message)


def next_cid(next_external: int, next_internal: Mapping[int, int], job: int | None) -> CoflowId:
    """Aalo's CoflowId rule (Pseudocode 2) as the registry applies it: a coflow of no known job
    (no parent, no ``external``) opens a new DAG, ``next_external.0``; a stage of job ``j`` (a
    child of one of j's coflows, or ``external=j``) gets ``j.(1 + the largest internal id issued
    in j)`` (``next_internal[j]``).  The one place the rule is written: the registry, the
    simulator's DAG workloads and the emulation's plans use it (:class:`CidAllocator`)."""
    if job is None:
        return CoflowId(next_external, 0)
    return CoflowId(job, next_internal[job])


class CidAllocator:
    """The registry's id assignment without a registry (no hosts, flows or durability): offline
    users (the simulator's DAG workloads) number coflows as the live API would, registering
    them in the same order."""

    def __init__(self, next_external: int = 1):
        self.next_external = next_external
        self.next_internal: dict[int, int] = {}

    def register(self, parent: CoflowId | None = None, external: int | None = None) -> CoflowId:
        job = parent.external if parent is not None else external
        if job is not None and job not in self.next_internal:
            raise KeyError(f"job {job} is not known")
        cid = next_cid(self.next_external, self.next_internal, job)
        if job is None:
            self.next_external = cid.external + 1
        self.next_internal[cid.external] = cid.internal + 1
        return cid


def parse_cid(s, field: str = "coflow_id") -> CoflowId:
    """The shared :meth:`CoflowId.parse` rule, its error as INVALID_ARGUMENT naming ``field``."""
    try:
        return CoflowId.parse(s, field)
    except CoflowIdError as e:
        raise _invalid(e.field, e.msg) from None


@dataclass(frozen=True)
class FlowSpec:
    src: str
    dst: str
    size_bytes: int | None = None
    ready: bool = False     # every byte ready to send: a shortfall is the network's, not demand's


@dataclass
class CoflowRecord:
    cid: CoflowId
    flows: list[FlowSpec]   # index = flow id within the coflow (stable)
    registered_at: float    # time.time()
    deadline_s: float | None = None   # relative to registered_at
    parent: CoflowId | None = None
    sent_bytes: dict[int, int] = field(default_factory=dict)   # flow id -> bytes sent (from Update)
    admitted: bool = True   # every stored record passed admission (rejected ones are not stored)
    lease_s: float | None = None      # None: no lease (never expires)
    owner: str | None = None          # the identity that registered it (None: API without identities)
    request_id: str | None = None     # the client's idempotency key of its Register
    # every parent stage (a child with a barrier on several coflows); ``parent`` is the first
    parents: tuple[CoflowId, ...] = ()

    def __post_init__(self):
        if not self.parents and self.parent is not None:
            self.parents = (self.parent,)
        elif self.parents and self.parent is None:
            self.parent = self.parents[0]

    @property
    def clairvoyant(self) -> bool:
        """Every flow's size is known."""
        return all(f.size_bytes is not None for f in self.flows)

    @property
    def total_bytes(self) -> int | None:
        return sum(f.size_bytes for f in self.flows) if self.clairvoyant else None  # type: ignore[misc]

    @property
    def total_sent(self) -> int:
        return sum(self.sent_bytes.values())

    def remaining(self, flow_id: int) -> int | None:
        """Bytes left of a flow (size - sent, at least 0); None when the size is unknown."""
        s = self.flows[flow_id].size_bytes
        return None if s is None else max(s - self.sent_bytes.get(flow_id, 0), 0)

    def to_dict(self) -> dict:
        """The JSON shape the CLI prints and the client returns."""
        return {
            "coflow_id": str(self.cid),
            "flows": [{"flow_id": i, "src": f.src, "dst": f.dst, "size_bytes": f.size_bytes,
                       "sent_bytes": self.sent_bytes.get(i, 0), "ready": f.ready}
                      for i, f in enumerate(self.flows)],
            "registered_at": self.registered_at,
            "deadline_s": self.deadline_s,
            "parent": str(self.parent) if self.parent is not None else None,
            "parents": [str(p) for p in self.parents],
            "admitted": self.admitted,
            "clairvoyant": self.clairvoyant,
            "total_bytes": self.total_bytes,
            "sent_bytes": self.total_sent,
            "lease_s": self.lease_s,
            "owner": self.owner,
        }


def _copy(x):
    """Snapshot of a record or a list of records (ids and flow specs are immutable)."""
    if isinstance(x, list):
        return [_copy(r) for r in x]
    return dataclasses.replace(x, flows=list(x.flows), sent_bytes=dict(x.sent_bytes))


AdmitFn = Callable[[CoflowRecord, list], "bool | tuple[bool, str]"]
