"""The P4Runtime stubs generated at first use (coflow.dataplane.p4rt_gen) run on the C (upb)
protobuf and speak the same wire as PyPI's p4runtime modules (which need the pure-Python one):
a message built with one is read back identically by the other, in separate processes."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytest.importorskip("grpc_tools", reason="p4rt_gen: grpcio-tools not installed")
pytest.importorskip("p4", reason="p4rt_gen: the p4runtime package is not installed")

WRITE = """
import sys
sys.path.insert(0, {ctl!r})
{imp}
from google.protobuf import text_format
from google.protobuf.internal import api_implementation
req = pb.WriteRequest(device_id=7)
req.election_id.low = 10
u = req.updates.add(type=pb.Update.INSERT)
te = u.entity.table_entry
te.table_id = 33554433
m = te.match.add(field_id=1)
m.exact.value = b"\\x0a\\x00\\x00\\x01"
te.action.action.action_id = 16777217
te.action.action.params.add(param_id=1, value=b"\\x05")
u2 = req.updates.add(type=pb.Update.MODIFY)
u2.entity.meter_entry.meter_id = 5
u2.entity.meter_entry.index.index = 3
u2.entity.meter_entry.config.cir = 1250000
u2.entity.meter_entry.config.cburst = 6250
sys.stdout.write(api_implementation.Type() + "\\n" + req.SerializeToString().hex() + "\\n")
"""

READ = """
import sys
sys.path.insert(0, {ctl!r})
{imp}
from google.protobuf import text_format
req = pb.WriteRequest.FromString(bytes.fromhex(sys.stdin.read().split()[1]))
sys.stdout.write(text_format.MessageToString(req))
"""

GEN = ("from coflow.dataplane import p4rt_gen\npb = p4rt_gen.load().p4runtime_pb2", "upb")
WHEEL = ("from p4.v1 import p4runtime_pb2 as pb", "python")


def run(code, impl, stdin=None, env=None):
    e = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=impl, **(env or {}))
    r = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True,
                       env=e, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.mark.parametrize("writer,reader", [(GEN, WHEEL), (WHEEL, GEN)], ids=["gen->wheel", "wheel->gen"])
def test_generated_stubs_run_on_upb_and_share_the_wire(tmp_path, writer, reader):
    env = {"COFLOW_PROTO_CACHE": str(tmp_path / "cache")}
    ctl = os.path.join(REPO, "controller")
    out = run(WRITE.format(ctl=ctl, imp=writer[0]), writer[1], env=env)
    assert out.split()[0] == writer[1]        # the generated stubs really run on upb
    text = run(READ.format(ctl=ctl, imp=reader[0]), reader[1], stdin=out, env=env)
    assert "cir: 1250000" in text and 'value: "\\n\\000\\000\\001"' in text and "device_id: 7" in text
    # and each side reads its own message back to the same text
    same = run(READ.format(ctl=ctl, imp=writer[0]), writer[1], stdin=out, env=env)
    assert same == text


def test_build_reports_a_missing_p4runtime_in_one_line(tmp_path, monkeypatch):
    from coflow.dataplane import p4rt_gen
    monkeypatch.setattr(p4rt_gen, "_DUMP", "raise SystemExit('no module named p4')")
    (tmp_path / "root").mkdir()
    with pytest.raises(p4rt_gen.P4rtGenError, match="cannot read the p4runtime package's descriptors"):
        p4rt_gen._build(tmp_path / "root" / "x")
