"""Tofino (TNA) target: the controller's side of ``p4src/tna/coflow_tna.p4``.

- :mod:`.target`: the per-target facts the translation layer is told (slot counts, the slot
  hash, D-CLAS key quantisation, byte units); ``bmv2`` and ``tofino`` profiles.
- :mod:`.crc`: the CRC that the switch's ``Hash`` extern computes (slot hash, owner tag).
- :mod:`.device_config`: the ``p4_device_config`` bytes Tofino P4Runtime servers expect
  (bf_switchd's ``--p4rt-server`` blob, Stratum's ``BfPipelineConfig``).
- :mod:`.tm`: strict priority / weights of a port's queues (the plan), as Stratum's chassis config
  QoS section and as bf_switchd's BF Runtime ``tf1.tm`` writes; :mod:`.tmpush` pushes them at
  every bring-up, :mod:`.bfrt` is the BF Runtime client, :mod:`.protodesc` declares messages no
  registry package ships.
- :mod:`.ports`: topology ports -> the P4Runtime port names of each server, SDK ports.
- :mod:`.sweep`: the slot sweep's results (``make p4-tofino-sweep``).
- :mod:`.fit`: the fit table from bf-p4c's resource logs.
- :mod:`.p4info`: what the controller uses, checked in both P4Infos.

``python -m coflow.tofino {fit,device-config,compare-p4info,tm,sweep,sweep-render}`` (see
``__main__``).
"""
