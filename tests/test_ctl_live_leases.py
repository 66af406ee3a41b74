"""Live (issue 30, item 1): the crash story against a real controller and switch. `coflow ctl
run --mode dclas --db` on a BMv2 (zero ports), 200 Registers from 8 client threads with
request ids over the unix socket; the controller is SIGKILLed mid-way (Register answers only
once the coflow's slot is on the switch, so saved-but-unanswered registrations are likely) and
restarted on the same database and socket; clients retry with their ids, two client threads
die with the controller. Then: no request id has two coflows, every acknowledged coflow is
registered, and one lease (2 s) after the restart, with the live
clients renewing, no orphan is left (nor the dead clients' coflows): the registry and the
switch's coflow_slot table hold exactly the live clients' acknowledged coflows. Skips without BMv2 or the P4 build."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from coflow.dataplane import toolchain

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COFLOW = [sys.executable, "-m", "coflow.cli"]
TOPO = os.path.join(REPO, "topologies", "bigswitch-16.json")
P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not toolchain.discover().simple_switch_grpc,
                       reason="ctl live test: simple_switch_grpc not found (toolchain.discover())"),
    pytest.mark.skipif(not os.path.exists(P4INFO), reason="ctl live test: build/ missing (make p4)"),
]
LEASE_S = 2.0


def test_crash_mid_registration_live(tmp_path):
    from coflow.api.client import CoflowApiError, CoflowClient
    from coflow.ctl import model as M
    from coflow.ctl.bmv2 import Bmv2
    from coflow.ctl.codec import Codec
    from coflow.dataplane.p4rt import P4RuntimeClient
    sw = Bmv2(1).start()
    sock, db, sf = str(tmp_path / "api.sock"), str(tmp_path / "reg.sqlite"), str(tmp_path / "st.json")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "controller"))

    def start():
        p = subprocess.Popen(COFLOW + ["ctl", "run", "--topo", TOPO, "--mode", "dclas", "--switch",
                                       f"s0={sw.address}", "--db", db, "--api-unix", sock,
                                       "--lease-s", str(LEASE_S), "--status-file", sf,
                                       "--set", "telemetry_s=0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
        line = p.stdout.readline()
        assert line and json.loads(line)["controller"] == "running", p.stderr.read()
        return p

    proc = start()
    acked: dict = {}
    lock = threading.Lock()
    crashed = threading.Event()
    errors = []

    dead = (3, 7)
    # the live applications renew their coflows (the client's keep-alive thread); the dead ones
    # stop with the controller, and their coflows must expire too
    clients = {t: CoflowClient(f"unix:{sock}", timeout=10, retry_s=0 if t in dead else 30,
                               keepalive=t not in dead) for t in range(8)}

    def client(t):
        dies = t in dead
        c = clients[t]
        if True:
            for j in range(25):
                if dies and crashed.is_set():
                    return
                rid = f"t{t}-{j}"
                try:
                    cid = c.register([(f"h{t}", f"h{8 + j % 8}", 1000 + j)], request_id=rid)
                except CoflowApiError as e:
                    if not dies:
                        errors.append((rid, str(e)))
                    continue
                with lock:
                    acked[rid] = (cid, t)

    ths = [threading.Thread(target=client, args=(t,)) for t in range(8)]
    try:
        for th in ths:
            th.start()
        end = time.monotonic() + 60
        while len(acked) < 60 and time.monotonic() < end:
            time.sleep(0.005)
        assert len(acked) >= 60, (errors[:3], proc.poll())
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
        crashed.set()
        t_restart = time.monotonic()
        proc = start()
        for th in ths:
            th.join(90)
        assert not errors, errors[:3]
        every = {cid for cid, _ in acked.values()}
        live = {cid for cid, t in acked.values() if t not in dead}
        with CoflowClient(f"unix:{sock}", timeout=10, keepalive=False) as c:
            reg = {d["coflow_id"]: d for d in c.list()}
            assert live <= set(reg) and len(every) == len(acked)
            orphans = set(reg) - every
            # a retried Register that made a second coflow would be one more: the only coflows
            # nobody was told of are the dead threads' last (at most one in flight each)
            assert len(orphans) <= 2
            print(f"acked {len(acked)}, registered {len(reg)} after the restart: "
                  f"{len(orphans)} orphan(s) of lost replies")
            time.sleep(max(0.0, LEASE_S + 1.5 - (time.monotonic() - t_restart)))
            reg = {d["coflow_id"] for d in c.list()}
        # one lease after the restart: exactly the live applications' coflows; orphans and the
        # dead applications' coflows expired
        assert reg == live
        time.sleep(1.5)                 # the slots of expired coflows linger 1 s, then go
        st = json.load(open(sf))
        assert st["leases"]["expired"] >= len(orphans) + len(every - live)
        codec = Codec.from_file(P4INFO)
        r = P4RuntimeClient(sw.address, 1, 1, codec.h)
        r.connect_reader(5)
        slots = set()
        for ent in r.read_many(codec.wildcard_reads()):
            v = codec.decode(ent)
            if v is not None and v.key[0] == "table" and v.key[1] == M.T_SLOT:
                m = dict(v.match)
                slots.add(f"{m['external_id']}.{m['internal_id']}")
        r.close()
        assert slots == reg                                               # the switch agrees
    finally:
        for c in clients.values():
            c.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        sw.stop()
