"""What the live tests against BMv2 share: the compiled pipeline's paths and the skip marks
(each says why, and the run's skip summary counts it)."""
import os

import pytest

from coflow.dataplane import toolchain

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P4INFO = os.path.join(REPO, "build", "coflow.p4info.txt")
BMV2_JSON = os.path.join(REPO, "build", "coflow.json")


def fabric_marks() -> list:
    """Marks of a live test that builds a BMv2 fabric in a namespace of its own (needs root)."""
    return [
        pytest.mark.live, pytest.mark.root,
        pytest.mark.skipif(not toolchain.discover().simple_switch_grpc,
                           reason="ctl live tests: simple_switch_grpc not found (toolchain.discover())"),
        pytest.mark.skipif(not (os.path.exists(P4INFO) and os.path.exists(BMV2_JSON)),
                           reason="ctl live tests: build/coflow.json missing (run `make p4`)"),
        pytest.mark.skipif(os.geteuid() != 0, reason="ctl live fabric tests need root (netns, veths)"),
    ]
