"""Run by p4runtime-shell's own Python (``.venv-shell``), not by the coflow package: connect to a
switch as a **backup** client (an election id below the controller's, so it may read but never
write) and print, one JSON line each, every entry of the tables named on the command line and the
default entry of those named after ``--defaults``, as base64 of the P4Runtime ``TableEntry`` message. The caller decodes them with
its own P4Runtime stubs (``coflow.ctl.shell.read_via_shell``): the wire format is the contract,
not either side's protobuf version.

    .venv-shell/bin/python shell_dump.py --grpc-addr unix:/tmp/s.sock --device-id 3 T1 T2 ... --defaults T3

Imports nothing from coflow (p4runtime-shell pins its own p4runtime and protobuf).
"""
import argparse
import base64
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grpc-addr", required=True)
    p.add_argument("--device-id", type=int, required=True)
    p.add_argument("--election-id", default="0,1", help="HIGH,LOW (default 0,1: a backup)")
    p.add_argument("--defaults", nargs="*", default=[], help="tables whose default entry to read")
    p.add_argument("tables", nargs="*", help="tables whose entries to read")
    a = p.parse_args(argv)
    high, low = (int(x) for x in a.election_id.split(","))
    from p4runtime_sh import shell as sh
    sh.setup(device_id=a.device_id, grpc_addr=a.grpc_addr, election_id=(high, low), verbose=False)
    try:
        for table in a.tables:
            for te in sh.TableEntry(table).read():
                print(json.dumps({"table": table, "default": False,
                                  "entry": base64.b64encode(te.msg().SerializeToString()).decode()}))
        for table in a.defaults:
            for te in sh.TableEntry(table)(is_default=True).read():
                print(json.dumps({"table": table, "default": True,
                                  "entry": base64.b64encode(te.msg().SerializeToString()).decode()}))
    finally:
        sh.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
