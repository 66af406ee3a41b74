"""The controller for one emulated mode, in a process of its own (its own GIL and core time).

    python -m coflow.emu.ctlproc --topo F --mode M --p4info I --json J --api-unix S \
        --switch e0=127.0.0.1:5xxxx ... [--set k=v ...]

Builds a :class:`coflow.ctl.daemon.Controller` (pipeline, routes/ECMP, port roles, mode; the
registry it owns) and serves the coflow API over that registry on the unix socket ``S``; prints
``{"ev": "ready", "api": "unix:S"}`` once the fabric forwards (``Controller.start()`` returned)
and runs until stdin closes or SIGTERM, then prints the controller's final status and exits.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topo", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--api-unix", required=True)
    ap.add_argument("--switch", action="append", default=[], metavar="NAME=ADDR")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--delta", type=float, default=0.01)
    args = ap.parse_args(argv)

    from .. import topology as topo
    from ..api.registry import CoflowRegistry
    from ..api.server import serve
    from ..ctl.daemon import Controller

    t = topo.load(args.topo)
    addrs = dict(s.split("=", 1) for s in args.switch)
    settings = dict(s.split("=", 1) for s in args.set)
    registry = CoflowRegistry([h.name for h in t.hosts])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    ctl = Controller(t, args.mode, args.p4info, args.json, addrs, registry=registry,
                     settings=settings, delta_s=args.delta)
    server = None
    try:
        ctl.start()
        server = serve(registry, address=None, extra_addresses=(f"unix:{args.api_unix}",),
                       after_register=lambda rec: ctl.wait_installed(rec.cid), rates=ctl.rate_board)
        print(json.dumps({"ev": "ready", "api": f"unix:{args.api_unix}"}), flush=True)
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        stop.wait()
        try:
            st = ctl.status()
            print(json.dumps({"ev": "status", "status": st}, default=str), flush=True)
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"ev": "status", "error": str(e)}), flush=True)
    finally:
        if server is not None:
            server.stop(0)
        ctl.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
