import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FB_TRACE = os.environ.get("FB_TRACE", os.path.join(REPO, "..", "shared", "traces", "FB2010-1Hr-150-0.txt"))


def pytest_configure(config):
    for name, what in (("live", "starts BMv2 switches or a Mininet fabric (needs the P4 toolchain)"),
                       ("root", "needs root (network namespaces, veths, tc)"),
                       ("slow", "takes seconds: subprocess round trips, long property runs; "
                                "`make test-fast` leaves live and slow tests out")):
        config.addinivalue_line("markers", f"{name}: {what}")


@pytest.fixture
def fb_trace():
    if not os.path.exists(FB_TRACE):
        pytest.skip(f"FB trace not found at {FB_TRACE} (set FB_TRACE or put ../shared beside the repo)")
    return FB_TRACE


@pytest.fixture(scope="session")
def tofino_build():
    """``make p4-tofino``'s output (build/tofino; build/tofino-bf_switchd beside it), compiled
    once per run; skips with the reason when bf-p4c is not installed."""
    import subprocess
    from coflow.dataplane.toolchain import find_tofino_compiler, tofino_missing_reason
    if not find_tofino_compiler():
        pytest.skip(tofino_missing_reason())
    r = subprocess.run(["make", "--no-print-directory", "-s", "p4-tofino"], cwd=REPO,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return os.path.join(REPO, "build", "tofino")


def pytest_terminal_summary(terminalreporter):
    """One loud line per skip reason with its count, so that a skipped live test never looks
    like a pass (``make test`` on a machine without the P4 toolchain or Mininet)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: dict[str, int] = {}
    for rep in skipped:
        longrepr = rep.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    terminalreporter.write_sep("=", f"{len(skipped)} tests SKIPPED", yellow=True, bold=True)
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"SKIPPED {n:>3}: {reason}", yellow=True, bold=True)
