"""p4runtime-shell beside the controller: an external P4Runtime client that agrees with it.

p4runtime-shell pins its own p4runtime and protobuf, so it lives in a venv of its own
(``.venv-shell``, ``make shell-venv``; ``$COFLOW_SHELL_VENV`` overrides the path). Two uses:

- ``make shell SW=<switch>`` (``python -m coflow.ctl.shell SW``) opens the shell on a switch a
  running controller manages, found in the controller's status (``--ctl`` its metrics address,
  or ``--status-file``), or given by ``--addr`` and ``--device-id``. The shell joins as a
  **backup** (election id 0,1, below the controller's), so an operator can read everything and
  write nothing.
- :func:`read_via_shell` runs ``shell_dump.py`` in that venv and decodes what the shell read
  with the controller's own codec, so a test can compare it with the desired state.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DUMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shell_dump.py")
BACKUP_ELECTION_ID = "0,1"


def shell_venv() -> str:
    return os.environ.get("COFLOW_SHELL_VENV") or os.path.join(REPO, ".venv-shell")


def shell_python() -> str | None:
    """The shell venv's python when p4runtime-shell is installed there, else None."""
    py = os.path.join(shell_venv(), "bin", "python")
    if not os.access(py, os.X_OK):
        return None
    ok = subprocess.run([py, "-c", "import p4runtime_sh"], capture_output=True, timeout=60)
    return py if ok.returncode == 0 else None


def read_via_shell(address: str, device_id: int, tables, codec, defaults=(),
                   timeout: float = 60.0) -> list:
    """Every entry of ``tables`` and the default entry of ``defaults``, as p4runtime-shell reads
    them from the switch,
    decoded by ``codec`` (:class:`coflow.ctl.codec.Codec`) into :mod:`coflow.ctl.model` values.
    Raises RuntimeError with the shell's last error line when it fails."""
    py = shell_python()
    if py is None:
        raise RuntimeError(f"p4runtime-shell not installed in {shell_venv()} (make shell-venv)")
    r = subprocess.run([py, DUMP, "--grpc-addr", address, "--device-id", str(device_id),
                        "--election-id", BACKUP_ELECTION_ID, *tables, "--defaults", *defaults],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"p4runtime-shell on {address}: exit {r.returncode}: {last}")
    from coflow.dataplane.pb import p4runtime_pb2
    out = []
    for line in r.stdout.splitlines():
        if not line.startswith("{"):
            continue                      # the shell's own messages ("You are not the primary ...")
        rec = json.loads(line)
        ent = p4runtime_pb2.Entity()
        ent.table_entry.ParseFromString(base64.b64decode(rec["entry"]))
        out.append(codec.decode(ent))
    return out


def resolve(sw: str, status: dict) -> tuple[str, int]:
    """(gRPC address, device id) of switch ``sw`` in a controller's JSON status."""
    switches = status.get("switches") or {}
    if sw not in switches:
        raise ValueError(f"no switch {sw!r} in the controller's status (it has: "
                         f"{', '.join(sorted(switches)) or 'none'})")
    s = switches[sw]
    return s["address"], int(s["device_id"])


def _status(args) -> dict:
    if args.status_file:
        with open(args.status_file) as f:
            return json.load(f)
    url = f"http://{args.ctl}/status"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)
    except OSError as exc:
        raise ValueError(f"{url}: {exc} (is `coflow ctl run --metrics {args.ctl}` running? "
                         "or give --status-file, or --addr and --device-id)") from exc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m coflow.ctl.shell",
                                description="open p4runtime-shell (read-only backup) on a switch")
    p.add_argument("switch", nargs="?", help="switch name in the controller's status")
    p.add_argument("--ctl", default="127.0.0.1:9100", help="the controller's --metrics address")
    p.add_argument("--status-file", help="a controller's --status-file instead")
    p.add_argument("--addr", help="the switch's gRPC address (skips the controller)")
    p.add_argument("--device-id", type=int)
    p.add_argument("--print", action="store_true", help="print the command instead of running it")
    args = p.parse_args(argv)
    try:
        if args.addr:
            if args.device_id is None:
                raise ValueError("--addr needs --device-id")
            addr, dev = args.addr, args.device_id
        else:
            if not args.switch:
                raise ValueError("name a switch (make shell SW=<name>) or give --addr/--device-id")
            addr, dev = resolve(args.switch, _status(args))
        py = shell_python()
        if py is None:
            raise ValueError(f"p4runtime-shell not installed in {shell_venv()} (run `make shell-venv`)")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cmd = [py, "-m", "p4runtime_sh", "--grpc-addr", addr, "--device-id", str(dev),
           "--election-id", BACKUP_ELECTION_ID]
    if args.print:
        print(" ".join(cmd))
        return 0
    print(f"p4runtime-shell on {args.switch or addr} ({addr}, device {dev}) as a backup client: "
          "reads only", file=sys.stderr)
    os.execv(py, cmd)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
