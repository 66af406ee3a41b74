import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FB_TRACE = os.environ.get("FB_TRACE", os.path.join(REPO, "..", "shared", "traces", "FB2010-1Hr-150-0.txt"))


@pytest.fixture
def fb_trace():
    if not os.path.exists(FB_TRACE):
        pytest.skip(f"FB trace not found at {FB_TRACE} (set FB_TRACE or put ../shared beside the repo)")
    return FB_TRACE
