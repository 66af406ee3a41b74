"""The P4Runtime controller daemon (``coflow ctl``).

- :mod:`.model`: desired state as plain values keyed by identity, and the ordered diff;
- :mod:`.translate`: topology / mode / parameters / Allocation -> desired state (pure);
- :mod:`.coord`: global D-CLAS coordination math (pure);
- :mod:`.rates`: rate modes (SEBF+MADD, HUG, Utopia, Fai) through the scheduler core (pure);
- :mod:`.codec`: model values <-> P4Runtime entities;
- :mod:`.switch`: one switch's connection, arbitration, pipeline and cached state;
- :mod:`.daemon`: :class:`~coflow.ctl.daemon.Controller`;
- :mod:`.observe`: Prometheus metrics and the JSON status over HTTP;
- :mod:`.bmv2`: simple_switch_grpc processes for tests and benchmarks;
- :mod:`.cli`: ``coflow ctl run`` / ``coflow ctl status``.
"""
