"""The coflow API: applications register coflows with the in-network scheduler.

- :mod:`coflow.api.registry`: the registry (validation, CoflowId assignment, SQLite durability,
  events) -- no gRPC needed.
- :mod:`coflow.api.admission`: Varys deadline admission built on the scheduler core.
- :mod:`coflow.api.server` / :mod:`coflow.api.client`: the ``coflow.v1.CoflowService`` gRPC
  service (``coflow.proto``, compiled on first use by :mod:`coflow.api.proto`) and its client.
- :mod:`coflow.api.cli`: ``coflow api ...``.
"""
