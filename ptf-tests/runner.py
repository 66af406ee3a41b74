#!/usr/bin/env python3
"""Run the PTF tests against a real BMv2, and always tear everything down.

1. create the network namespace NETNS (removing a stale one of the same name first), disable
   IPv6 in it (no router solicitations into the switch), and N veth pairs swpI <-> ptfI;
2. start simple_switch_grpc in it with --priority-queues 8, gRPC on the namespace's 127.0.0.1;
3. push the pipeline (BMv2 JSON + P4Info) over P4Runtime;
4. run ptf in the namespace on the ptfI ends;
5. stop the switch and delete the namespace (which deletes the veths) -- in a finally block,
   so also on failure, SIGINT or SIGTERM.

Needs root (namespaces, veths, tc). Exit status: ptf's.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "controller"))

from coflow.dataplane import toolchain  # noqa: E402


def sh(*cmd, check=True, quiet=False):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return r


class Testbed:
    """A namespace with veth pairs and one simple_switch_grpc; a context manager that always
    cleans up."""

    def __init__(self, netns: str, nports: int, grpc_port: int, log_dir: str,
                 switch_log_level: str = "warn", extra_switch_args: list[str] | None = None):
        self.netns = netns
        self.nports = nports
        self.grpc_addr = f"127.0.0.1:{grpc_port}"
        self.log_dir = log_dir
        self.level = switch_log_level
        self.extra = extra_switch_args or []
        self.switch: subprocess.Popen | None = None

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
        ssg = toolchain.find_tool("simple_switch_grpc")
        if not ssg:
            raise RuntimeError("simple_switch_grpc not found")
        ifaces = []
        for i in range(self.nports):
            ifaces += ["-i", f"{i}@{self.swport(i)}"]
        # BMv2 formats every log message even without a log destination unless the level is
        # off (measured with perf: spdlog/fmt dominated the profile), so always pass the level.
        logging = ["--log-level", "off"]
        if self.level != "off":
            logging = ["--log-level", self.level, "--log-file",
                       os.path.join(self.log_dir, "switch"), "--log-flush"]
        cmd = self.nsexec(ssg, "--device-id", "0", *ifaces, *logging,
                          "--no-p4", *self.extra, "--",
                          "--grpc-server-addr", self.grpc_addr, "--priority-queues", "8")
        with open(os.path.join(self.log_dir, "switch.stdout"), "w") as out:
            self.switch = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        self._wait_grpc()

    def _wait_grpc(self, timeout: float = 20.0):
        port = self.grpc_addr.rsplit(":", 1)[1]
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.switch.poll() is not None:
                raise RuntimeError(f"simple_switch_grpc exited with {self.switch.returncode}; "
                                   f"see {self.log_dir}/switch.stdout")
            r = sh(*self.nsexec("ss", "-ltn", f"sport = :{port}"), check=False)
            if f":{port}" in r.stdout:
                return
            time.sleep(0.2)
        raise RuntimeError("simple_switch_grpc did not open its gRPC port")

    def push_pipeline(self, p4info: str, bmv2_json: str, python: str = sys.executable):
        code = ("import sys; sys.path.insert(0, %r)\n"
                "from coflow.dataplane.p4rt import P4RuntimeClient\n"
                "c = P4RuntimeClient(%r, device_id=0, election_id=1)\n"
                "c.connect(); c.set_pipeline(%r, %r); c.close()\n"
                % (os.path.join(ROOT, "controller"), self.grpc_addr, p4info, bmv2_json))
        r = subprocess.run(self.nsexec(python, "-c", code), capture_output=True, text=True,
                           env=dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python"))
        if r.returncode != 0:
            raise RuntimeError("pipeline push failed:\n" + r.stdout + r.stderr)

    def teardown(self):
        if self.switch is not None and self.switch.poll() is None:
            self.switch.terminate()
            try:
                self.switch.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.switch.kill()
                self.switch.wait(timeout=5)
        self.switch = None
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
    ap.add_argument("--grpc-port", type=int, default=9559)
    ap.add_argument("--log-dir", default=os.path.join(ROOT, "build", "ptf"))
    ap.add_argument("--switch-log-level", default=os.environ.get("PTF_SWITCH_LOG", "warn"))
    ap.add_argument("--ptf", default=os.path.join(os.path.dirname(sys.executable), "ptf"))
    ap.add_argument("tests", nargs="*", help="ptf test specs (default: all)")
    args = ap.parse_args(argv)

    if os.geteuid() != 0:
        print("runner.py needs root (network namespace, veths, tc)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _raise_interrupt)
    t0 = time.time()
    summary = None
    tb = Testbed(args.netns, args.ports, args.grpc_port, args.log_dir, args.switch_log_level)
    try:
        with tb:
            tb.push_pipeline(os.path.abspath(args.p4info), os.path.abspath(args.json))
            swports = ",".join(tb.swport(i) for i in range(args.ports))
            params = (f"grpc='{tb.grpc_addr}';p4info='{os.path.abspath(args.p4info)}';"
                      f"device_id=0;swports='{swports}'")
            cmd = tb.nsexec(args.ptf, "--test-dir", HERE, "--pypath", os.path.join(HERE, "lib"),
                            "--pypath", os.path.join(ROOT, "controller"),
                            "--log-file", os.path.join(args.log_dir, "ptf.log"),
                            "--qlen", "100000", "--test-params", params)
            for i in range(args.ports):
                cmd += ["--interface", f"0-{i}@{tb.hostport(i)}"]
            cmd += args.tests
            env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
            rc, summary = run_ptf(cmd, env)
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
    print(f"ptf runner: finished in {time.time() - t0:.1f} s (exit {rc})")
    if summary:
        print(summary)
    return rc


def run_ptf(cmd, env) -> tuple[int, str | None]:
    """Run ptf, echo its output, and turn unittest's closing lines into
    'ptf: N passed, N failed[, N skipped]'."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    ran = failed = skipped = None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
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
        return rc, None
    line = f"ptf: {ran - failed - skipped} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    return rc, line


if __name__ == "__main__":
    sys.exit(main())
