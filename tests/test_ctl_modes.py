"""coflow.ctl.modes: one policy object per controller mode."""
import pytest

from coflow.ctl.modes import MODES, RATE_MODES, mode_policy
from coflow.params import MB


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_has_a_policy(mode):
    p = mode_policy(mode)
    assert p.name == mode and p.sched is not None
    assert p.rate == (mode in RATE_MODES)
    assert p.coordinated == (mode in ("dclas", "fifo-lm"))
    assert not (p.rate and p.coordinated)
    assert p.dclas_params.K == 8          # the switch's 8 queues, whatever the mode
    assert p.meters == (p.rate and mode not in ("sincronia", "sbf-sent"))   # order only, no rate control


def test_sincronia_is_a_scheduled_mode_without_rate_control():
    p = mode_policy("sincronia")
    assert p.rate and not p.meters and p.sched.name == "sincronia"


def test_policy_parameters():
    assert mode_policy("dclas", {"K": "4"}).dclas_params.K == 4
    assert mode_policy("fifo-lm").heavy_bytes == 10 * MB
    assert mode_policy("fifo-lm", {"heavy_bytes": "5000"}).heavy_bytes == 5000
    assert mode_policy("sebf").heavy_bytes is None
    with pytest.raises(ValueError, match="unknown mode"):
        mode_policy("wfq")
