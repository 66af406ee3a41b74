"""An external client agrees with the controller: p4runtime-shell (its own venv, ``make
shell-venv``) connects to a switch the controller manages as a backup client and reads every
entry of the tables the controller owns; what it reads is the controller's desired state for
that switch. Also: ``make shell``'s switch lookup and its one-line errors.
Skips loudly without the toolchain, the compiled pipeline or the shell's venv."""
import os

import pytest

from coflow.ctl import shell

from test_ctl_live_p4rt import BMV2_JSON, P4INFO, controller, offset_ids, switches, wait_for  # noqa: F401


def test_resolve_from_status_and_its_errors():
    st = {"switches": {"l0": {"address": "unix:/tmp/x.sock", "device_id": 7}}}
    assert shell.resolve("l0", st) == ("unix:/tmp/x.sock", 7)
    with pytest.raises(ValueError, match=r"no switch 'e9' .*it has: l0"):
        shell.resolve("e9", st)
    with pytest.raises(ValueError, match="it has: none"):
        shell.resolve("l0", {})


def test_cli_errors_are_one_line(capsys, tmp_path):
    assert shell.main(["--addr", "unix:/tmp/x.sock"]) == 2
    assert capsys.readouterr().err.strip() == "error: --addr needs --device-id"
    assert shell.main([]) == 2
    assert "name a switch" in capsys.readouterr().err
    f = tmp_path / "status.json"
    f.write_text('{"switches": {}}')
    assert shell.main(["e0", "--status-file", str(f)]) == 2
    assert capsys.readouterr().err.strip().startswith("error: no switch 'e0'")
    assert shell.main(["e0", "--ctl", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: http://127.0.0.1:1/status:") and "\n" not in err


@pytest.mark.live
@pytest.mark.skipif(shell.shell_python() is None,
                    reason="p4runtime-shell venv missing (make shell-venv: pip install p4runtime-shell)")
def test_shell_reads_what_the_controller_wrote(switches):  # noqa: F811
    from coflow import topology as T
    from coflow.ctl import model as M
    from coflow.ctl.codec import Codec
    pytest.importorskip("coflow.ctl.bmv2")
    if not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)):
        pytest.skip("shell live test: build/coflow.json missing (run `make p4`)")
    t = offset_ids(T.leafspine(2, 2, 2))
    addrs, _ = switches(t)
    c = controller(t, addrs, "sebf", settings={"link_mbps": "10"}).start()
    try:
        c.registry.register([("h0", "h2", 1_000_000), ("h1", "h3", 2_000_000)])
        ag = c.agents["l0"]
        assert wait_for(lambda: ag.actual is not None and ag.actual.table(M.T_FLOW_METER)
                        and ag.in_sync, timeout=10)
        want = c._desired()["l0"]
        got = shell.read_via_shell(ag.address, ag.device_id, M.MANAGED_TABLES, Codec.from_file(P4INFO),
                                   defaults=M.DEFAULT_TABLES)
        entries = {e for e in got if isinstance(e, M.TableEntry)}
        defaults = {e for e in got if isinstance(e, M.DefaultAction)}
        want_entries = set(want.of_kind("table"))
        # every entry the controller wants is there, and nothing else in the tables it owns
        assert entries == want_entries
        assert len(entries) > 10   # roles, routes, thresholds, slots, overrides, flow meters
        assert {e.table for e in entries} >= {M.T_ROUTING, M.T_SLOT, M.T_OVERRIDE, M.T_FLOW_METER}
        cfg = [d for d in defaults if d.table == M.T_CONFIG]
        assert cfg and cfg[0] in set(want.of_kind("default"))
        # the controller is still primary and wrote nothing more because of the shell
        assert c.status()["switches"]["l0"]["state"] == "master"
        assert c.status()["switches"]["l0"]["write_errors"] == 0
    finally:
        c.stop()
