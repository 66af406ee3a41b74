"""Device configs for Tofino P4Runtime servers (coflow.tofino.device_config): pure functions."""
from __future__ import annotations

import struct

import pytest

from coflow.tofino import device_config as dc

A = dc.TofinoArtifacts("coflow_tna", "pipe", b"\x00BIN\xff" * 3, b'{"ctx": 1}', b'{"bfrt": 2}')


def test_bf_switchd_blob_layout():
    """pi_imp.c _pi_update_device_start: le32 length + bytes, for name, tofino.bin,
    context.json, pipeline name, bfrt.json."""
    blob = dc.bf_switchd_config(A)
    want = b""
    for part in (b"coflow_tna", A.tofino_bin, A.context_json, b"pipe", A.bfrt_json):
        want += struct.pack("<I", len(part)) + part
    assert blob == want
    assert blob[:4] == bytes([10, 0, 0, 0])            # little-endian
    assert dc.parse_bf_switchd_config(blob) == A


def test_bf_switchd_blob_without_bfrt_ends_in_an_empty_pipeline_name():
    a = dc.TofinoArtifacts("p", "pipe", b"B", b"C", None)
    blob = dc.bf_switchd_config(a)
    assert blob.endswith(struct.pack("<I", 0))
    assert dc.parse_bf_switchd_config(blob) == dc.TofinoArtifacts("p", "", b"B", b"C", None)


def test_bf_switchd_rejects_long_names_and_bad_blobs():
    with pytest.raises(ValueError):
        dc.bf_switchd_config(dc.TofinoArtifacts("x" * 101, "pipe", b"", b""))
    with pytest.raises(ValueError):
        dc.parse_bf_switchd_config(struct.pack("<I", 50) + b"short")
    with pytest.raises(ValueError):
        dc.parse_bf_switchd_config(struct.pack("<I", 1) + b"a")


def test_stratum_descriptor_has_the_cited_field_numbers():
    cls = dc.stratum_message_class()
    d = cls.DESCRIPTOR
    assert d.full_name == "stratum.hal.barefoot.BfPipelineConfig"
    prof = d.nested_types_by_name["Profile"]
    got = {("BfPipelineConfig", f.name): f.number for f in d.fields}
    got.update({("BfPipelineConfig.Profile", f.name): f.number for f in prof.fields})
    assert got == {(m, n): num for m, n, num, _, _ in dc.STRATUM_FIELDS}
    assert d.fields_by_name["profiles"].message_type is prof
    ps = prof.fields_by_name["pipe_scope"]
    assert ps.is_repeated if hasattr(ps, "is_repeated") else ps.label == ps.LABEL_REPEATED


def test_stratum_config_round_trips_and_is_the_wire_format():
    a = dc.TofinoArtifacts("coflow_tna", "pipe", b"BIN", b"CTX", b"RT", (0, 1))
    blob = dc.stratum_config(a)
    assert dc.parse_stratum_config(blob) == a
    # field 1 (p4_name, length-delimited) first: tag 0x0a, then field 2 (0x12), field 3 (0x1a)
    assert blob[0] == 0x0A and blob[1] == len("coflow_tna") and blob[2:12] == b"coflow_tna"
    assert blob[12] == 0x12 and blob[13] == 2 and blob[14:16] == b"RT"
    assert blob[16] == 0x1A
    # inside the profile: 1 name, 2 context, 3 binary, 4 packed pipe_scope
    prof = blob[18:]
    assert prof[0] == 0x0A and prof[2:6] == b"pipe" and prof[6] == 0x12 and prof[8:11] == b"CTX"
    assert prof[11] == 0x1A and prof[13:16] == b"BIN" and prof[16] == 0x22 and prof[17:] == bytes([2, 0, 1])


def test_write_device_config_from_a_build_dir(tmp_path):
    (tmp_path / "pipe").mkdir()
    (tmp_path / "pipe" / "tofino.bin").write_bytes(b"BIN")
    (tmp_path / "pipe" / "context.json").write_bytes(b"{}")
    (tmp_path / "bfrt.json").write_bytes(b"[]")
    for server in dc.SERVERS:
        path = dc.write_device_config(str(tmp_path), server)
        blob = open(path, "rb").read()
        parse = dc.parse_bf_switchd_config if server == "bf_switchd" else dc.parse_stratum_config
        assert parse(blob) == dc.TofinoArtifacts("coflow_tna", "pipe", b"BIN", b"{}", b"[]")
    with pytest.raises(ValueError):
        dc.device_config(A, "onos")
    with pytest.raises(ValueError):
        dc.load_artifacts(str(tmp_path / "nothing"))
