"""``coflow ctl ...``: run the controller daemon, and ask a running one for its status.

    coflow ctl run --topo topologies/fattree-k4.json --mode dclas [--set K=8 --set link_mbps=10]
                   [--switch e0=127.0.0.1:50001 ... | --grpc-base 50000]
                   [--p4info build/coflow.p4info.txt --json build/coflow.json]
                   [--target tofino [--tofino-server bf_switchd|stratum] [--tofino-build DIR]
                                    [--tofino-port-map F] [--tofino-chassis-config F|DIR]
                                    [--tofino-bfrt-port 50052]]
                   [--api 127.0.0.1:50051] [--api-unix /tmp/coflow-api.sock] [--db reg.sqlite]
                   [--lease-s 30] [--api-apps apps.json --api-tls-cert C --api-tls-key K]
                   [--p4rt-ca ca.crt [--p4rt-cert c.crt --p4rt-key c.key] [--p4rt-server-name N]]
                   [--etcd 127.0.0.1:2379,127.0.0.2:2379,127.0.0.3:2379 [--etcd-prefix /coflow/default]
                    [--etcd-ttl 1] [--ha-name NAME]]
                   [--metrics 127.0.0.1:9100] [--status-file F] [--election-id 10] [--delta-ms 10]
    coflow ctl status --address 127.0.0.1:9100      (or --file F)

``run`` stays in the foreground until SIGINT/SIGTERM. ``status`` prints the JSON status that the
controller serves on ``GET http://<metrics address>/status`` (or wrote to ``--status-file``).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class _ArgError(ValueError):
    pass


def _kv(items, opt: str) -> dict[str, str]:
    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise _ArgError(f"{opt} {it!r}: expected KEY=VALUE")
        out[k] = v
    return out


def cmd_run(args) -> int:
    from .. import topology as topo
    from .daemon import Controller, default_switch_addrs
    from ..sched import deploy
    try:
        deploy.fabric(args.mode)       # ValueError: unknown mode 'x'; modes: ...
        t = topo.load(args.topo)
        settings = _kv(args.set, "--set")
        addrs = default_switch_addrs(t, args.grpc_base)
        given = _kv(args.switch, "--switch")
        unknown = sorted(set(given) - set(addrs))
        if unknown:
            raise _ArgError(f"--switch: no switch named {', '.join(unknown)} in {args.topo}")
        addrs.update(given)
        if args.target == "tofino":
            _tofino_pipeline(args)
        else:
            args.p4info = args.p4info or os.path.join(REPO, "build", "coflow.p4info.txt")
            args.json = args.json or os.path.join(REPO, "build", "coflow.json")
        for path, opt in ((args.p4info, "--p4info"), (args.json, "--json")):
            if not os.path.exists(path):
                raise _ArgError(f"{opt} {path}: not found (run `make p4`"
                                + (" / `make p4-tofino`)" if args.target == "tofino" else ")"))
        tofino = _tofino_tm(args, t, settings) if args.target == "tofino" else {}
    except (_ArgError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    registry: "CoflowRegistry | None" = None
    from ..api.registry import CoflowRegistry
    try:
        if not 0 <= args.lease_s <= 86400:
            raise ValueError("--lease-s must be in [0, 86400] (0: coflows that ask for none never expire)")
        from ..api.cli import load_identities, load_tls
        identities = load_identities(args.api_apps)
        api_tls = load_tls(args.api_tls_cert, args.api_tls_key, "--api-tls")
        p4rt_tls = _p4rt_tls(args)
        quota = identities.quota if identities is not None else None
        election = etcd = None
        if args.etcd:
            if args.db or args.db_shared:
                raise ValueError("--etcd holds the registry: without --db / --db-shared")
            from ..api.etcd import Election, Etcd, EtcdError
            from ..api.etcd_registry import EtcdCoflowRegistry
            etcd = Etcd(args.etcd)
            name = args.ha_name or f"{os.uname().nodename}-{os.getpid()}"
            try:
                election = Election(etcd, args.etcd_prefix, name, ttl=args.etcd_ttl)
                registry = EtcdCoflowRegistry([h.name for h in t.hosts], etcd, args.etcd_prefix,
                                              election=election, default_lease_s=args.lease_s or None,
                                              quota=quota)
                election.start()
            except EtcdError as exc:
                etcd.close()
                raise ValueError(f"--etcd {args.etcd}: {exc}") from None
        else:
            registry = CoflowRegistry([h.name for h in t.hosts], db_path=args.db, shared=args.db_shared,
                                      default_lease_s=args.lease_s or None, quota=quota)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        ctl = Controller(t, args.mode, args.p4info, args.json, addrs, registry=registry,
                         settings=settings, election_id=args.election_id,
                         delta_s=args.delta_ms / 1e3, metrics_addr=args.metrics,
                         status_file=args.status_file, start_timeout=args.start_timeout,
                         target=args.target, p4rt_tls=p4rt_tls, election=election, **tofino)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if election is not None:
            election.stop()
        registry.close()
        return 2
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    server = None
    try:
        ctl.start()
        if args.api or args.api_unix:
            from ..api.server import serve
            extra = (f"unix:{args.api_unix}" if not args.api_unix.startswith("unix:")
                     else args.api_unix,) if args.api_unix else ()
            server = serve(registry, address=args.api, extra_addresses=extra,
                           after_register=lambda rec: ctl.wait_installed(rec.cid),
                           rates=ctl.rate_board, tls=api_tls, identities=identities)
            ctl.set_health(server.coflow_health, server.coflow_service)
        print(json.dumps({"controller": "running", "mode": args.mode, "switches": addrs,
                          "api": getattr(server, "coflow_addresses", None),
                          "metrics": ctl.metrics_addr,
                          "etcd": {"prefix": args.etcd_prefix, "name": election.name,
                                   "primary": election.is_leader()} if election else None}), flush=True)
        done.wait()
    except (RuntimeError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop(grace=0.5)
        ctl.stop()
        if election is not None:
            election.stop()         # revokes its lease: a backup takes over at once
        registry.close()
        if etcd is not None:
            etcd.close()
    return 0


def _p4rt_tls(args):
    """``--p4rt-ca`` [``--p4rt-cert`` ``--p4rt-key``] [``--p4rt-server-name``] -> the switches'
    channel TLS (coflow.dataplane.p4rt.ChannelTls), or None (plaintext)."""
    if not args.p4rt_ca:
        if args.p4rt_cert or args.p4rt_key or args.p4rt_server_name:
            raise ValueError("--p4rt-cert / --p4rt-key / --p4rt-server-name need --p4rt-ca")
        return None
    from ..dataplane.p4rt import ChannelTls
    return ChannelTls.from_files(args.p4rt_ca, args.p4rt_cert, args.p4rt_key, args.p4rt_server_name)


def _tofino_pipeline(args) -> None:
    """``--target tofino``: the P4Info and the device config of ``make p4-tofino``'s output
    (``--tofino-build``), the config built for ``--tofino-server`` (coflow.tofino.device_config)
    unless ``--json`` names a ready one."""
    from ..dataplane.p4rt import P4InfoHelper
    from ..tofino import device_config as dc
    from ..tofino import ports
    build = args.tofino_build or os.path.join(REPO, "build", ports.BUILDS[args.tofino_server][0])
    args.p4info = args.p4info or os.path.join(build, dc.P4INFO_NAME)
    if args.json is None:
        try:
            args.json = dc.write_device_config(build, args.tofino_server)
        except (OSError, ValueError) as exc:
            raise _ArgError(f"--tofino-build {build}: {exc} (run `make p4-tofino`)") from None
    if os.path.exists(args.p4info):   # (a missing one is reported with the other inputs)
        try:
            ports.check_build(P4InfoHelper.from_file(args.p4info), args.tofino_server, args.p4info)
        except (OSError, ValueError) as exc:
            raise _ArgError(f"--tofino-server {args.tofino_server}: {exc}") from None


def _tofino_tm(args, topo, settings: dict) -> dict:
    """``--target tofino``: the port map and the traffic-manager pusher for the server (the
    plan of the mode: coflow.tofino.tm; settings ``tofino_shape_mbps`` shapes every port,
    ``port_buffer_bytes`` is each queue's base buffer)."""
    from ..tofino import ports, tm
    from ..tofino.tmpush import TmPusher
    from .translate import split_settings
    pm = ports.load(args.tofino_port_map, topo)
    ctl, _ = split_settings(settings)
    plan = tm.with_port(tm.plan_for_mode(args.mode, args.weighted_dclas),
                        ctl.tofino_shape_mbps,
                        buffer_bytes=ctl.port_buffer_bytes)
    pusher = TmPusher(args.tofino_server, plan, {s.name: s.ports for s in topo.switches}, pm,
                      chassis_config=args.tofino_chassis_config, bfrt_port=args.tofino_bfrt_port)
    return {"tofino_server": args.tofino_server, "port_map": pm, "tm_pusher": pusher}


def cmd_status(args) -> int:
    if args.file:
        try:
            with open(args.file) as f:
                st = json.load(f)
        except (OSError, ValueError) as exc:
            print(f"error: {args.file}: {exc}", file=sys.stderr)
            return 2
    else:
        import urllib.request
        url = f"http://{args.address}/status"
        try:
            with urllib.request.urlopen(url, timeout=args.timeout) as r:
                st = json.load(r)
        except (OSError, ValueError) as exc:
            print(f"error: {url}: {exc}", file=sys.stderr)
            return 2
    print(json.dumps(st, indent=1))
    return 0


def add_commands(sub) -> None:
    ctl = sub.add_parser("ctl", help="the P4Runtime controller daemon").add_subparsers(
        dest="ctlcmd", required=True)
    p = ctl.add_parser("run", help="run the controller (foreground)")
    p.add_argument("--topo", required=True, help="topology file (coflow-topology/1)")
    # (checked in cmd_run: the modes are the schedulers' declarations, and the parser of every
    # coflow command is built without importing the scheduler core)
    p.add_argument("--mode", required=True, help="a scheduler that runs in the fabric: fair, dclas, fifo-lm, "
                   "sebf, ... (coflow.sched.deploy.modes)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="scheduler parameter (e.g. K=8, T=2) or controller setting (link_mbps, "
                        "fair_prio, rtt_us, port_buffer_bytes, burst_buffer_frac, min_rate_frac, progress_s, "
                        "audit_s, slot_idle_epochs, tofino_shape_mbps)")
    p.add_argument("--switch", action="append", metavar="NAME=HOST:PORT",
                   help="gRPC address of one switch (default 127.0.0.1:grpc_base+device_id)")
    p.add_argument("--grpc-base", type=int, default=50000)
    p.add_argument("--target", choices=("bmv2", "tofino"), default="bmv2",
                   help="the switches' P4 program: bmv2 (p4src/coflow.p4) or tofino "
                        "(p4src/tna/coflow_tna.p4); the same translation, told the target")
    p.add_argument("--p4info", default=None,
                   help="default build/coflow.p4info.txt (tofino: <tofino-build>/coflow_tna.p4info.txt)")
    p.add_argument("--json", default=None,
                   help="the device config pushed: default build/coflow.json (tofino: built "
                        "from --tofino-build for --tofino-server)")
    p.add_argument("--tofino-server", choices=("bf_switchd", "stratum"), default="bf_switchd",
                   help="the Tofino P4Runtime server's device-config format")
    p.add_argument("--tofino-build", default=None, help="make p4-tofino's output for the server "
                   "(build/tofino for stratum, build/tofino-bf_switchd for bf_switchd)")
    p.add_argument("--tofino-port-map", default=None, metavar="FILE",
                   help="topology port -> SDK device port per switch (coflow.tofino.ports; "
                        "bf_switchd's table entries and TM writes; default the same number)")
    p.add_argument("--tofino-chassis-config", default=None, metavar="FILE|DIR",
                   help="stratum: the chassis config (text) each Stratum runs, a file or a "
                        "directory of <switch>.pb.txt; the controller adds its QoS section and "
                        "pushes it over gNMI")
    p.add_argument("--weighted-dclas", action="store_true",
                   help="tofino: D-CLAS's queues share each port by Aalo's weights in the traffic "
                        "manager (default strict priority)")
    p.add_argument("--tofino-bfrt-port", type=int, default=50052,
                   help="bf_switchd: the BF Runtime gRPC port on each switch's host (TM writes)")
    p.add_argument("--api", help="serve the coflow API on HOST:PORT")
    p.add_argument("--api-unix", help="also serve it on this unix socket path")
    p.add_argument("--api-apps", help="applications and token hashes (coflow-apps/1): calls need a "
                                      "token, an app changes only its coflows, within its quota")
    p.add_argument("--api-tls-cert", help="serve the API's TCP address over TLS with this chain (PEM)")
    p.add_argument("--api-tls-key", help="... and this key (PEM)")
    p.add_argument("--p4rt-ca", help="P4Runtime channels over TLS: the switches' CA (PEM)")
    p.add_argument("--p4rt-cert", help="client certificate for switches that ask for one (mutual TLS)")
    p.add_argument("--p4rt-key", help="... and its key")
    p.add_argument("--p4rt-server-name", help="name the switches' certificates carry, if not their address")
    p.add_argument("--db", help="registry SQLite file (a restarted controller reloads it)")
    p.add_argument("--lease-s", type=float, default=30.0,
                   help="lease of a coflow whose Register asks for none: unregistered when neither "
                        "KeepAlive nor its traffic renews it (default 30; 0 = never expires)")
    p.add_argument("--etcd", metavar="HOST:PORT,...",
                   help="HA across machines: the registry and the primary's election in this etcd "
                        "cluster (every member's client address); not with --db")
    p.add_argument("--etcd-prefix", default="/coflow/default",
                   help="the key prefix of this fabric's controllers in etcd")
    p.add_argument("--etcd-ttl", type=int, default=1,
                   help="seconds of the primary's lease: a backup takes over this long after the "
                        "primary died (default 1; etcd grants it with heartbeats <= 50 ms)")
    p.add_argument("--ha-name", help="this controller's name in the election (default host-pid)")
    p.add_argument("--db-shared", action="store_true",
                   help="share --db with the other controllers of these switches: the primary "
                        "takes changes, backups follow it and continue its coflows on takeover")
    p.add_argument("--metrics", default=None, metavar="HOST:PORT",
                   help="serve /metrics (Prometheus) and /status (JSON), e.g. 127.0.0.1:9100")
    p.add_argument("--status-file", help="also write the JSON status here (about once a second)")
    p.add_argument("--election-id", type=int, default=10)
    p.add_argument("--delta-ms", type=float, default=10.0, help="D-CLAS coordination interval")
    p.add_argument("--start-timeout", type=float, default=30.0)
    p.set_defaults(fn=cmd_run)
    p = ctl.add_parser("status", help="print a running controller's JSON status")
    p.add_argument("--address", default="127.0.0.1:9100", help="the controller's --metrics address")
    p.add_argument("--file", help="read a --status-file instead")
    p.add_argument("--timeout", type=float, default=5.0)
    p.set_defaults(fn=cmd_status)
