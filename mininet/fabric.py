#!/usr/bin/env python3
"""Bring up a BMv2 fabric under Mininet, the controller in one mode, and the Mininet CLI.

    sudo .venv/bin/python mininet/fabric.py [--topo fattree:4] [--mode dclas] [--rate-mbps 1]
                                            [--set key=value ...]

Everything is the emulation's own code (controller/coflow/emu): BMv2Switch processes with
--priority-queues 8, hosts with offloads and IPv6 off and static ARP, the emulated traffic
manager of the mode on every switch egress interface, and the controller (pipeline, routes,
roles, mode) with the coflow API on a unix socket that the hosts can reach. Leaving the CLI
(or Ctrl-D / Ctrl-C) stops the controller, the switches and Mininet.

Try, at the mininet> prompt:
    h0 python3 -m coflow.emu.agent --help
    h8 iperf3 -s -D ; h0 iperf3 -c 10.0.0.9 -t 5
"""
import argparse
import os
import sys

# `coflow` comes from the venv (`make venv` installs the package): run this with .venv/bin/python.


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topo", default="fattree:4")
    ap.add_argument("--mode", default="dclas")
    ap.add_argument("--rate-mbps", type=float, default=1.0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--no-cli", action="store_true", help="bring up, check, tear down (a smoke test)")
    args = ap.parse_args()

    from mininet.cli import CLI
    from coflow.emu.fabric import Fabric, tm_for_mode
    from coflow.emu.plan import CLASS_FLOOR
    from coflow.emu.runner import CTL_DEFAULTS, ControllerProc, REPO as PKG_REPO, load_topology

    t = load_topology(args.topo)
    settings = {"link_mbps": repr(args.rate_mbps), **CTL_DEFAULTS,
                **dict(s.split("=", 1) for s in args.set)}
    fab = Fabric(t)
    ctl = None
    try:
        fab.start()
        fab.apply_tm(tm_for_mode(args.mode), int(args.rate_mbps * 1000), class_floor=CLASS_FLOOR)
        topo_file = os.path.join(fab.run_dir, "topology.json")
        t.save(topo_file)
        sock = os.path.join(fab.run_dir, "api.sock")
        ctl = ControllerProc(topo_file, args.mode, os.path.join(PKG_REPO, "build", "coflow.p4info.txt"),
                             os.path.join(PKG_REPO, "build", "coflow.json"), fab.switch_addrs(), sock,
                             settings, os.path.join(fab.run_dir, "ctl.log"))
        ctl.wait_ready()
        print(f"fabric {t.name} up in mode {args.mode}: coflow API at unix:{sock}, "
              f"switch logs and controller log in {fab.run_dir}")
        for s in fab.net.switches:
            print(f"  {s.name}: gRPC {s.grpc_addr}, thrift {s.thrift_port}, device {s.device_id}")
        if not args.no_cli:
            CLI(fab.net)
    finally:
        if ctl is not None:
            ctl.stop()
        fab.stop()
        fab.remove_run_dir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
