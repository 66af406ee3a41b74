"""``coflow api ...``: serve the coflow API standalone, and talk to it.

    coflow api serve --topo topologies/fattree-k4.json [--db reg.sqlite] [--address 127.0.0.1:50051]
                     [--unix /tmp/coflow-api.sock] [--admit-gbps 1] [--lease-s 30]
                     [--apps apps.json] [--tls-cert api.crt --tls-key api.key]
    coflow api new-token NAME
    coflow api certs DIR [--san 10.0.0.5] [--client controller]
    coflow api register --flow h0:h1:1000[:ready] --flow h2:h1 [--parent 7.0 [--parent 7.1] | --external 7] [--deadline 2.5]
                        [--lease-s 600] [--request-id KEY]
    coflow api keepalive 7.0 [7.1 ...]
    coflow api add-flows 7.0 --flow h3:h1:500
    coflow api update 7.0 --size 1=2000 --sent 0=1000 --ready 1=1
    coflow api unregister 7.0
    coflow api status 7.0
    coflow api list

Client commands take ``--token`` (or ``$COFLOW_API_TOKEN``) and ``--ca`` (TLS) for a server with
identities (coflow.api.auth). Client commands print JSON on stdout and exit 0; a failed call prints one line
``error: CODE: field: problem`` on stderr and exits 2.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading

DEFAULT_ADDRESS = "127.0.0.1:50051"
#: the servers' default lease for a Register that asks for none (seconds)
DEFAULT_LEASE_S = 30.0


class _ArgError(ValueError):
    pass


def _parse_flow(s: str):
    parts = s.split(":")
    if len(parts) not in (2, 3, 4) or not parts[0] or not parts[1]:
        raise _ArgError(f"--flow {s!r}: expected SRC:DST[:SIZE_BYTES][:ready]")
    ready = False
    if len(parts) == 4:
        if parts[3] != "ready":
            raise _ArgError(f"--flow {s!r}: the fourth part is 'ready' or nothing, not {parts[3]!r}")
        ready = True
    if len(parts) == 2 or parts[2] == "":
        return parts[0], parts[1], None, ready
    try:
        size = int(parts[2])
    except ValueError:
        raise _ArgError(f"--flow {s!r}: SIZE_BYTES {parts[2]!r} is not an integer") from None
    return parts[0], parts[1], size, ready


def _parse_flags(items, opt: str) -> dict[int, bool]:
    out = {}
    for s in items or []:
        k, sep, v = s.partition("=")
        try:
            if not sep or v not in ("0", "1"):
                raise ValueError
            out[int(k)] = v == "1"
        except ValueError:
            raise _ArgError(f"{opt} {s!r}: expected FLOW_ID=1 or FLOW_ID=0") from None
    return out


def _parse_counts(items, opt: str) -> dict[int, int]:
    out = {}
    for s in items or []:
        k, sep, v = s.partition("=")
        try:
            if not sep:
                raise ValueError
            out[int(k)] = int(v)
        except ValueError:
            raise _ArgError(f"{opt} {s!r}: expected FLOW_ID=BYTES (integers)") from None
    return out


def _client(args):
    from .client import CoflowClient
    return CoflowClient(args.address, timeout=args.timeout, keepalive=False,
                        token=args.token or os.environ.get("COFLOW_API_TOKEN") or None,
                        ca=args.ca, server_name=args.server_name)


def _run(args, fn) -> int:
    from .client import CoflowApiError
    try:
        with _client(args) as c:
            out = fn(c)
    except CoflowApiError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: --ca {args.ca}: {e.strerror}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1))
    return 0


def cmd_register(args) -> int:
    flows = [_parse_flow(f) for f in args.flow]
    pars = args.parent or []       # one --parent goes as the (deprecated) single field, as before
    return _run(args, lambda c: c.register_coflow(flows, parent=pars[0] if len(pars) == 1 else None,
                                                  parents=pars if len(pars) > 1 else None, deadline_s=args.deadline,
                                                  external=args.external, request_id=args.request_id,
                                                  lease_s=args.lease_s))


def cmd_keepalive(args) -> int:
    def go(c):
        renewed, gone = c.keep_alive(args.coflow_id)
        return {"renewed": renewed, "not_found": gone}
    return _run(args, go)


def cmd_add_flows(args) -> int:
    flows = [_parse_flow(f) for f in args.flow]
    return _run(args, lambda c: c.add_flows(args.coflow_id, flows))


def cmd_update(args) -> int:
    sizes, sent = _parse_counts(args.size, "--size"), _parse_counts(args.sent, "--sent")
    ready = _parse_flags(args.ready, "--ready")
    return _run(args, lambda c: c.update(args.coflow_id, sizes=sizes, sent=sent, ready=ready))


def cmd_unregister(args) -> int:
    return _run(args, lambda c: c.unregister(args.coflow_id))


def cmd_status(args) -> int:
    return _run(args, lambda c: c.status(args.coflow_id))


def cmd_list(args) -> int:
    return _run(args, lambda c: c.list())


def load_identities(path):
    """``--apps FILE`` -> coflow.api.auth.Identities (None without one); one-line errors."""
    if not path:
        return None
    from .auth import Identities
    return Identities.load(path)


def load_tls(cert, key, opt: str = "--tls"):
    """``--tls-cert`` / ``--tls-key`` -> (chain PEM, key PEM) for serve(), or None."""
    if not cert and not key:
        return None
    if not (cert and key):
        raise _ArgError(f"{opt}-cert and {opt}-key go together")
    out = []
    for path, o in ((cert, f"{opt}-cert"), (key, f"{opt}-key")):
        try:
            with open(path, "rb") as f:
                out.append(f.read())
        except OSError as e:
            raise _ArgError(f"{o} {path}: {e.strerror}") from None
    return out[0], out[1]


def cmd_new_token(args) -> int:
    from .auth import new_token
    tok, h = new_token()
    entry = {"name": args.name, "token_sha256": h}
    if not args.apps:
        print(json.dumps({"token": tok, "app": entry}))
        return 0
    # --apps FILE: the entry goes into the file (created when missing), only the token is printed
    from .auth import FORMAT, Identities
    doc: dict = {"format": FORMAT, "apps": []}
    if os.path.exists(args.apps):
        with open(args.apps) as f:
            doc = json.load(f)
    if any(a.get("name") == args.name for a in doc.get("apps", [])):
        raise ValueError(f"{args.apps}: an application named {args.name!r} is there already")
    for k in ("max_coflows", "max_flows"):
        if getattr(args, k) is not None:
            entry[k] = getattr(args, k)
    if args.admin:
        entry["admin"] = True
    doc.setdefault("apps", []).append(entry)
    Identities.parse(doc, args.apps)     # what the server will read
    fd = os.open(args.apps + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(args.apps + ".tmp", args.apps)
    print(tok)
    return 0


def cmd_certs(args) -> int:
    """A lab CA and the certificates it signs (coflow.api.certs): the server's, and one per
    ``--client`` for mutual TLS. The CA's key is written too (mode 0600), to sign more later."""
    from . import certs
    ca = certs.make_ca(args.ca_name, days=args.days)
    srv = certs.issue(ca, args.name, sans=tuple(args.san or ("127.0.0.1", "localhost")), days=args.days)
    out = {"server": certs.write(ca, srv, args.dir, args.name)}
    for c in args.client or []:
        out[c] = certs.write(ca, certs.issue(ca, c, sans=(), client=True, days=args.days), args.dir, c)
    fd = os.open(os.path.join(args.dir, "ca.key"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(ca.key)
    print(json.dumps(out, indent=1))
    return 0


def build_registry(args):
    """The registry ``coflow api serve`` (and the controller's CLI) builds from --topo/--hosts,
    --db, --max-flows and --admit-gbps."""
    from .registry import CoflowRegistry
    if args.topo:
        from .. import topology as topo
        t = topo.load(args.topo)
        hosts = [h.name for h in sorted(t.hosts, key=lambda h: h.index)]
    elif args.hosts:
        hosts = [h for h in args.hosts.split(",") if h]
    else:
        raise _ArgError("give --topo FILE (or --hosts h0,h1,...)")
    admit = None
    if args.admit_gbps is not None:
        if not args.admit_gbps > 0:
            raise _ArgError("--admit-gbps must be > 0")
        from .admission import varys_admission
        admit = varys_admission(hosts, args.admit_gbps * 1e9 / 8)
    ids = load_identities(getattr(args, "apps", None))
    quota = ids.quota if ids is not None else None
    lease = getattr(args, "lease_s", None)
    if lease is not None and not 0 <= lease <= 86400:
        raise _ArgError("--lease-s must be in [0, 86400] (0: coflows that ask for none never expire)")
    return CoflowRegistry(hosts, db_path=args.db, max_flows_per_coflow=args.max_flows, admit=admit,
                          default_lease_s=lease or None, quota=quota)


def cmd_serve(args) -> int:
    from .server import serve, start_reaper
    try:
        reg = build_registry(args)
        ids = load_identities(args.apps)
        tls = load_tls(args.tls_cert, args.tls_key)
    except (_ArgError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        server = serve(reg, args.address or None, [f"unix:{args.unix}"] if args.unix else (),
                       tls=tls, identities=ids)
    except (OSError, ValueError) as e:
        reg.close()
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"listening": server.coflow_addresses, "hosts": len(reg.hosts), "coflows": len(reg),
                      "db": args.db, "admission": args.admit_gbps is not None}), flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    reaper = start_reaper(reg)
    try:
        while not done.wait(0.5):
            pass
    finally:
        reaper.set()
        server.stop(grace=1.0).wait()
        reg.close()
    return 0


def add_commands(sub) -> None:
    ap = sub.add_parser("api", help="the coflow API (gRPC coflow.v1.CoflowService): serve it, call it")
    s = ap.add_subparsers(dest="apicmd", required=True)

    def client_parser(name, help):
        p = s.add_parser(name, help=help)
        p.add_argument("--address", default=DEFAULT_ADDRESS,
                       help=f"server address: host:port or unix:/path (default {DEFAULT_ADDRESS})")
        p.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default 10)")
        p.add_argument("--token", help="the application's token (default $COFLOW_API_TOKEN)")
        p.add_argument("--ca", help="CA certificate (PEM) to check the server's TLS certificate; TLS on")
        p.add_argument("--server-name", help="name the server's certificate carries, if not the address's")
        return p

    p = s.add_parser("serve", help="serve the API standalone (without the controller)")
    p.add_argument("--topo", help="topology file (its hosts are the valid flow endpoints)")
    p.add_argument("--hosts", help="comma-separated host names instead of --topo")
    p.add_argument("--db", help="SQLite file that keeps the registry across restarts")
    p.add_argument("--address", default=DEFAULT_ADDRESS, help=f"host:port (default {DEFAULT_ADDRESS}; '' = none)")
    p.add_argument("--unix", help="also listen on this unix socket path (for Mininet hosts)")
    p.add_argument("--max-flows", type=int, default=10000, help="flows per coflow (default 10000)")
    p.add_argument("--admit-gbps", type=float,
                   help="Varys deadline admission with this host link rate (Gbit/s); off by default")
    p.add_argument("--lease-s", type=float, default=DEFAULT_LEASE_S,
                   help=f"lease of a coflow whose Register asks for none (default {DEFAULT_LEASE_S:g}; "
                        "0 = such coflows never expire)")
    p.add_argument("--apps", help="applications and their token hashes (coflow-apps/1 JSON): every "
                                  "call must then carry a token; see coflow.api.auth")
    p.add_argument("--tls-cert", help="serve TLS on TCP addresses with this certificate chain (PEM)")
    p.add_argument("--tls-key", help="... and this private key (PEM)")
    p.set_defaults(fn=cmd_serve)

    p = s.add_parser("new-token", help="a fresh application token and its apps-file entry (JSON)")
    p.add_argument("name")
    p.add_argument("--apps", help="add the entry to this apps file (created when missing) and print "
                                  "only the token")
    p.add_argument("--max-coflows", type=int, help="with --apps: the application's coflow (slot) quota")
    p.add_argument("--max-flows", type=int, help="with --apps: its flow quota over all its coflows")
    p.add_argument("--admin", action="store_true", help="with --apps: may change any application's coflows")
    p.set_defaults(fn=cmd_new_token)

    p = s.add_parser("certs", help="a lab CA and the certificates it signs (server, clients) as PEM files")
    p.add_argument("dir", help="directory for ca.crt, ca.key, NAME.crt/.key and each client's")
    p.add_argument("--name", default="server", help="the server certificate's name (default server)")
    p.add_argument("--san", action="append", help="an IP address or DNS name the server certificate "
                                                  "carries (repeatable; default 127.0.0.1 and localhost)")
    p.add_argument("--client", action="append", help="also a client certificate of this name (mutual TLS)")
    p.add_argument("--ca-name", default="coflow lab CA", help="the CA's common name")
    p.add_argument("--days", type=int, default=30, help="validity in days (default 30)")
    p.set_defaults(fn=cmd_certs)

    p = client_parser("register", "register a coflow; prints it as JSON")
    p.add_argument("--flow", action="append", required=True, metavar="SRC:DST[:SIZE][:ready]",
                   help="a flow; ':ready': every byte is ready to send (its sender never waits on "
                        "its application)")
    p.add_argument("--parent", action="append", help="a parent CoflowId (the new coflow is the job's next "
                                                     "stage); repeat it for a child of several coflows")
    p.add_argument("--external", type=int, help="a new stage of this known job id")
    p.add_argument("--deadline", type=float, help="deadline in seconds (Varys admission)")
    p.add_argument("--lease-s", type=float, help="the coflow's lease (default: the server's); renew "
                                                 "it with `coflow api keepalive`")
    p.add_argument("--request-id", help="idempotency key (default: a fresh one; retries reuse it)")
    p.set_defaults(fn=cmd_register)

    p = client_parser("keepalive", "renew coflows' leases")
    p.add_argument("coflow_id", nargs="+")
    p.set_defaults(fn=cmd_keepalive)

    p = client_parser("add-flows", "add flows to a coflow")
    p.add_argument("coflow_id")
    p.add_argument("--flow", action="append", required=True, metavar="SRC:DST[:SIZE][:ready]")
    p.set_defaults(fn=cmd_add_flows)

    p = client_parser("update", "set flow sizes / report sent bytes / mark flows ready")
    p.add_argument("coflow_id")
    p.add_argument("--size", action="append", metavar="FLOW=BYTES")
    p.add_argument("--sent", action="append", metavar="FLOW=BYTES")
    p.add_argument("--ready", action="append", metavar="FLOW=1|0",
                   help="1: every byte of the flow is ready to send; 0: no longer")
    p.set_defaults(fn=cmd_update)

    for name, fn, help in (("unregister", cmd_unregister, "unregister a coflow"),
                           ("status", cmd_status, "one coflow as JSON")):
        p = client_parser(name, help)
        p.add_argument("coflow_id")
        p.set_defaults(fn=fn)
    p = client_parser("list", "every registered coflow as JSON")
    p.set_defaults(fn=cmd_list)
