#!/usr/bin/env python3
"""Run the PTF tests against a real BMv2, and always tear everything down.

1. create the network namespace NETNS (removing a stale one of the same name first), disable
   IPv6 in it (no router solicitations into the switch), and N veth pairs swpI <-> ptfI;
2. start simple_switch_grpc in it with --priority-queues 8 (coflow.dataplane.bmv2.Bmv2: gRPC on a
   unix socket, the filesystem being shared; its Thrift port is a test parameter);
3. push the pipeline (BMv2 JSON + P4Info) over P4Runtime;
4. run ptf in the namespace on the ptfI ends;
5. stop the switch and delete the namespace (which deletes the veths) -- in a finally block,
   so also on failure, SIGINT or SIGTERM.

Needs root (namespaces, veths, tc). Exit status: ptf's. ``--summary PATH`` writes the run's
counts, time, switch build and the weighted-sharing test's measured shares as JSON (what
``coflow results save --kind ptf`` turns into README's "P4 data plane" block).
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time

from coflow.dataplane.bmv2 import Bmv2

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(*cmd, check=True, quiet=False):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return r


class Testbed:
    """A namespace with veth pairs and one simple_switch_grpc (:class:`coflow.dataplane.bmv2.Bmv2`,
    the project's one way to start a switch: in a namespace it serves gRPC on a unix socket); a
    context manager that always cleans up."""

    def __init__(self, netns: str, nports: int, log_dir: str,
                 switch_log_level: str = "warn", extra_switch_args: list[str] | None = None):
        self.netns = netns
        self.nports = nports
        self.log_dir = log_dir
        self.level = switch_log_level
        self.extra = tuple(extra_switch_args or ())
        self.bmv2: Bmv2 | None = None

    @property
    def grpc_addr(self) -> str:
        assert self.bmv2 is not None, "the testbed is not up"
        return self.bmv2.address

    @property
    def thrift_port(self) -> int:
        assert self.bmv2 is not None, "the testbed is not up"
        return self.bmv2.thrift_port

    @property
    def switch(self) -> subprocess.Popen | None:
        return self.bmv2.proc if self.bmv2 is not None else None

    def swport(self, i: int) -> str:
        return f"swp{i}"

    def hostport(self, i: int) -> str:
        return f"ptf{i}"

    def nsexec(self, *cmd) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *cmd]

    def __enter__(self):
        self.teardown()  # a stale namespace of ours from a killed run
        sh("ip", "netns", "add", self.netns)
        try:
            self._setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def _setup(self):
        for key in ("all", "default"):
            sh(*self.nsexec("sysctl", "-q", "-w", f"net.ipv6.conf.{key}.disable_ipv6=1"))
        sh("ip", "-n", self.netns, "link", "set", "lo", "up")
        for i in range(self.nports):
            a, b = self.swport(i), self.hostport(i)
            sh("ip", "-n", self.netns, "link", "add", a, "type", "veth", "peer", "name", b)
            for dev in (a, b):
                sh("ip", "-n", self.netns, "link", "set", dev, "mtu", "1600", "up")
                sh(*self.nsexec("ethtool", "-K", dev, "tx", "off", "rx", "off", "sg", "off",
                                "tso", "off", "gso", "off", "gro", "off"), check=False)
        os.makedirs(self.log_dir, exist_ok=True)
        # BMv2 formats every log message even without a log destination unless the level is
        # off (measured with perf: spdlog/fmt dominated the profile): Bmv2 always passes it.
        log_file = os.path.join(self.log_dir, "switch") if self.level != "off" else None
        self.bmv2 = Bmv2(0, {i: self.swport(i) for i in range(self.nports)}, netns=self.netns,
                         log_file=log_file, log_level=self.level, run_dir=self.log_dir, name="ptf",
                         tag="coflow-ptf", extra_args=self.extra)
        self.bmv2.start(timeout=20.0, stdout_path=os.path.join(self.log_dir, "switch.stdout"))

    def push_pipeline(self, p4info: str, bmv2_json: str, python: str = sys.executable):
        code = ("from coflow.dataplane.p4rt import P4RuntimeClient\n"
                "c = P4RuntimeClient(%r, device_id=0, election_id=1)\n"
                "c.connect(); c.set_pipeline(%r, %r); c.close()\n"
                % (self.grpc_addr, p4info, bmv2_json))
        r = subprocess.run(self.nsexec(python, "-c", code), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("pipeline push failed:\n" + r.stdout + r.stderr)

    def teardown(self):
        if self.bmv2 is not None:
            self.bmv2.stop()
        self.bmv2 = None
        if sh("ip", "netns", "list", check=False).stdout.split().count(self.netns):
            sh("ip", "netns", "del", self.netns, check=False)

    def __exit__(self, *exc):
        self.teardown()
        return False


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p4info", default=os.path.join(ROOT, "build", "coflow.p4info.txt"))
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "coflow.json"))
    ap.add_argument("--netns", default="coflow-ptf")
    ap.add_argument("--ports", type=int, default=5)
    ap.add_argument("--log-dir", default=os.path.join(ROOT, "build", "ptf"))
    ap.add_argument("--switch-log-level", default=os.environ.get("PTF_SWITCH_LOG", "warn"))
    ap.add_argument("--ptf", default=os.path.join(os.path.dirname(sys.executable), "ptf"))
    ap.add_argument("--summary", help="write the run's summary (counts, time, switch, measured shares) as JSON")
    ap.add_argument("tests", nargs="*", help="ptf test specs (default: all)")
    args = ap.parse_args(argv)

    if os.geteuid() != 0:
        print("runner.py needs root (network namespace, veths, tc)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _raise_interrupt)
    t0 = time.time()
    from coflow.provenance import provenance
    pv = provenance()     # the code under test (the summary saved later names it)
    summary = counts = binary = None
    tb = Testbed(args.netns, args.ports, args.log_dir, args.switch_log_level)
    try:
        with tb:
            tb.push_pipeline(os.path.abspath(args.p4info), os.path.abspath(args.json))
            binary = tb.bmv2.binary if tb.bmv2 is not None else None
            swports = ",".join(tb.swport(i) for i in range(args.ports))
            params = (f"grpc='{tb.grpc_addr}';p4info='{os.path.abspath(args.p4info)}';"
                      f"device_id=0;swports='{swports}';thrift={tb.thrift_port}")
            cmd = tb.nsexec(args.ptf, "--test-dir", HERE, "--pypath", os.path.join(HERE, "lib"),
                            "--log-file", os.path.join(args.log_dir, "ptf.log"),
                            "--qlen", "100000", "--test-params", params)
            for i in range(args.ports):
                cmd += ["--interface", f"0-{i}@{tb.hostport(i)}"]
            cmd += args.tests
            rc, summary, counts = run_ptf(cmd, dict(os.environ))
            if tb.switch is not None and tb.switch.poll() is not None:
                print(f"simple_switch_grpc died during the tests (exit {tb.switch.returncode})",
                      file=sys.stderr)
                rc = rc or 1
    except KeyboardInterrupt:
        print("interrupted: tore the testbed down", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        print(f"ptf runner: {exc}", file=sys.stderr)
        return 1
    seconds = time.time() - t0
    print(f"ptf runner: finished in {seconds:.1f} s (exit {rc})")
    if summary:
        print(summary)
    if args.summary:
        from coflow.dataplane.toolchain import bmv2_build
        from coflow.report import write_json
        write_json({"rc": rc, "seconds": round(seconds, 1), "selected": args.tests, **(counts or {}),
                    "switch": bmv2_build(binary), "provenance": pv}, args.summary)
        print(f"ptf runner: {args.summary}")
    return rc


#: the weighted-sharing test's line (test_tm.WeightedSharingTest): its measured shares
WEIGHTED_LINE = re.compile(r"weighted window (\d+) departures: (.*)")


def run_ptf(cmd, env) -> tuple[int, str | None, dict | None]:
    """Run ptf, echo its output, and turn unittest's closing lines into
    'ptf: N passed, N failed[, N skipped]' and counts (with the weighted-sharing test's
    measured shares when it ran)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    ran = failed = skipped = None
    weighted = None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        w = WEIGHTED_LINE.search(line)
        if w:
            weighted = {"window": int(w.group(1)),
                        "shares": [float(x) for x in re.findall(r"prio \d+: ([0-9.]+)", w.group(2))]}
        m = re.match(r"Ran (\d+) tests? in", line)
        if m:
            ran = int(m.group(1))
        m = re.match(r"(OK|FAILED)\b(.*)", line.strip())
        if m and ran is not None:
            counts = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2)))
            failed = counts.get("failures", 0) + counts.get("errors", 0)
            skipped = counts.get("skipped", 0)
    rc = proc.wait()
    if ran is None or failed is None:
        return rc, None, None
    line = f"ptf: {ran - failed - skipped} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    return rc, line, {"ran": ran, "passed": ran - failed - skipped, "failed": failed, "skipped": skipped,
                      "weighted": weighted}


if __name__ == "__main__":
    sys.exit(main())
