"""The traffic-manager configuration pushed to each Tofino switch, as the pipeline is.

``coflow ctl run --target tofino`` gives each switch's keeper (:class:`coflow.ctl.switch.
SwitchAgent`) a :class:`TmPusher`: every time the switch comes up as primary (controller start,
switch restart, which also re-pushes the pipeline) the keeper calls :meth:`TmPusher.apply`
before it reads the switch back, and a failure fails that bring-up (retried with backoff: a
switch whose queues would be served round-robin is not handed to the scheduler).

- **Stratum**: a gNMI ``Set`` replacing the root with the chassis config (Stratum
  ``yang_parse_tree_paths.cc`` ``SetUpRoot``: a ``bytes_val`` that is not an OpenConfig device is
  parsed as a text-format ``ChassisConfig``; ``config_monitoring_service.cc`` pushes it when it
  changed and saves it as the chassis config file), on the switch's own gRPC address: the
  operator's chassis config for that switch with the controller's QoS section
  (:func:`coflow.tofino.tm.merge_chassis_config`). gNMI's messages are pygnmi's (a registry
  package shipping the compiled gnmi.proto).
- **bf_switchd**: BF Runtime ``tf1.tm`` writes (:mod:`coflow.tofino.bfrt`) on the switch's host
  at the BF Runtime port (50052 by default), the ports' queues found in ``tf1.tm.port.cfg``.
"""
from __future__ import annotations

import logging
import os

from . import tm as T
from .ports import PortMap

log = logging.getLogger(__name__)

GNMI_SET = "/gnmi.gNMI/Set"


def gnmi_set_request(chassis_text: str):
    """A gNMI ``SetRequest`` replacing the root path with ``chassis_text`` as bytes."""
    from pygnmi.spec.v080 import gnmi_pb2
    req = gnmi_pb2.SetRequest()
    upd = req.replace.add()
    upd.path.SetInParent()            # the root: no elements
    upd.val.bytes_val = chassis_text.encode()
    return req


def chassis_config_for(source: str, switch: str) -> str:
    """The operator's chassis config of ``switch``: ``source`` is a file (every switch) or a
    directory holding ``<switch>.pb.txt``."""
    path = os.path.join(source, f"{switch}.pb.txt") if os.path.isdir(source) else source
    try:
        with open(path) as f:
            return f.read()
    except OSError as exc:
        raise ValueError(f"--tofino-chassis-config {path}: {exc.strerror or exc}") from None


class TmPusher:
    """Per-switch TM configuration for ``server`` (``stratum`` or ``bf_switchd``)."""

    def __init__(self, server: str, plan: T.PortQueuePlan, switch_ports: dict,
                 port_map: PortMap | None = None, chassis_config: str | None = None,
                 bfrt_port: int = 50052, bfrt_device: int = 0, timeout: float = 5.0):
        if server not in ("stratum", "bf_switchd"):
            raise ValueError(f"unknown Tofino server {server!r}")
        if server == "stratum" and not chassis_config:
            raise ValueError("--tofino-chassis-config: required with --tofino-server stratum (the "
                             "chassis config Stratum runs; the controller adds its QoS section)")
        self.server = server
        self.plan = plan
        self.switch_ports = {k: sorted(v) for k, v in switch_ports.items()}
        self.port_map = port_map or PortMap()
        self.chassis_config = chassis_config
        self.bfrt_port = bfrt_port
        self.bfrt_device = bfrt_device
        self.timeout = timeout
        self.applied: dict = {}          # switch -> times applied
        self._texts: dict = {}
        if server == "stratum":
            for sw in self.switch_ports:      # read and merged now: a bad file fails the start
                self._texts[sw] = None
                self.stratum_text(sw, 0)

    def stratum_text(self, switch: str, node_id: int) -> str:
        got = self._texts.get(switch)
        if got is not None and got[0] == node_id:
            return got[1]
        src = str(self.chassis_config)
        base = chassis_config_for(src, switch)
        text = T.merge_chassis_config(base, T.stratum_vendor_text(
            self.plan, {node_id: self.switch_ports[switch]}), where=src)
        self._texts[switch] = (node_id, text)
        return text

    def bfrt_address(self, p4rt_address: str) -> str:
        host = p4rt_address.rsplit(":", 1)[0]
        return f"{host}:{self.bfrt_port}"

    def apply(self, agent) -> None:
        """Configure ``agent``'s switch (a SwitchAgent: name, address, device_id)."""
        if self.server == "stratum":
            self._apply_stratum(agent)
        else:
            self._apply_bfrt(agent)
        self.applied[agent.name] = self.applied.get(agent.name, 0) + 1
        log.info("%s: traffic manager configured (%s, %s)", agent.name, self.server,
                 self.plan.discipline)

    def _apply_stratum(self, agent) -> None:
        import grpc
        from pygnmi.spec.v080 import gnmi_pb2
        req = gnmi_set_request(self.stratum_text(agent.name, agent.device_id))
        with grpc.insecure_channel(agent.address) as ch:
            call = ch.unary_unary(GNMI_SET, request_serializer=lambda m: m.SerializeToString(),
                                  response_deserializer=gnmi_pb2.SetResponse.FromString)
            try:
                call(req, timeout=self.timeout)
            except grpc.RpcError as exc:
                raise RuntimeError(f"{agent.name}: gNMI Set of the chassis config: "
                                   f"{exc.code().name}: {exc.details()}") from None

    def _apply_bfrt(self, agent) -> None:
        from .bfrt import BfrtClient
        dev_ports = [self.port_map.sdk_port(agent.name, p) for p in self.switch_ports[agent.name]]
        c = BfrtClient(self.bfrt_address(agent.address), self.bfrt_device, timeout=self.timeout)
        try:
            c.connect()
            port_cfg = {}
            for key, data in c.read(T.T_PORT_CFG, [(("dev_port", p),) for p in dev_ports]):
                port_cfg[key["dev_port"]] = (data["pg_id"], data["egress_qid_queues"])
            missing = sorted(set(dev_ports) - set(port_cfg))
            if missing:
                raise RuntimeError(f"{agent.name}: tf1.tm.port.cfg has no dev_port {missing}")
            c.write(T.bfrt_tm_writes(self.plan, port_cfg))
        finally:
            c.close()
