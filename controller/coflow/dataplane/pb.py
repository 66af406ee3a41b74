"""The P4Runtime protobuf modules every part of the project uses: ``p4runtime_pb2``,
``p4runtime_pb2_grpc``, ``p4data_pb2``, ``p4info_pb2``, generated at first use by
:mod:`coflow.dataplane.p4rt_gen` so that the C (upb) protobuf runs. Import from here, never
from PyPI's ``p4.v1`` / ``p4.config.v1`` (those need the pure-Python protobuf)."""
from .p4rt_gen import load as _load

_m = _load()
p4runtime_pb2 = _m.p4runtime_pb2
p4runtime_pb2_grpc = _m.p4runtime_pb2_grpc
p4data_pb2 = _m.p4data_pb2
p4info_pb2 = _m.p4info_pb2
p4types_pb2 = _m.p4types_pb2

__all__ = ["p4runtime_pb2", "p4runtime_pb2_grpc", "p4data_pb2", "p4info_pb2", "p4types_pb2"]
