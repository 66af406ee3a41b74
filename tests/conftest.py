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
