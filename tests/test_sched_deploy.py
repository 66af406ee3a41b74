"""A scheduler declares once, on its class, how it runs in the fabric (``Fabric``) and whether it
is clairvoyant; every driver's list of modes is derived from those declarations
(``coflow.sched.deploy``), and a scheduler registered with one is a mode everywhere."""
from dataclasses import dataclass

import numpy as np
import pytest

from coflow.ctl import modes as CM
from coflow.dataplane import constants as C
from coflow.emu import fabric as EF
from coflow.emu import runner as ER
from coflow.sched import REGISTRY
from coflow.sched import deploy as D
from coflow.sched.base import COORDINATED, FAIR, METERS, QUEUES, Allocation, Fabric, Scheduler, register


def test_the_declared_modes_are_the_controllers_modes_as_before():
    """The lists the drivers used to write by hand, now derived (fai moved after sebf; sbf-sent,
    the how-to's example, is one file)."""
    assert D.modes() == CM.MODES == ("fair", "dclas", "fifo-lm", "sebf", "fai", "hug", "utopia", "sincronia",
                                     "sbf-sent")
    assert D.rate_modes() == CM.RATE_MODES == ("sebf", "fai", "hug", "utopia", "sincronia", "sbf-sent")
    assert D.coordinated_modes() == CM.COORDINATED == ("dclas", "fifo-lm")
    assert D.default_modes() == ER.DEFAULT_MODES == ("fair", "dclas", "fifo-lm", "sebf", "hug", "sincronia")
    assert {m: D.enforcement(m) for m in D.modes() if D.enforcement(m) in (METERS, QUEUES)} == {
        "sebf": "meters", "hug": "meters", "utopia": "meters", "fai": "meters", "sincronia": "queues",
        "sbf-sent": "queues"}
    assert CM.MODE_CODE == {"fair": C.MODE_FAIR, "dclas": C.MODE_DCLAS, "fifo-lm": C.MODE_FIFO_LM,
                            **{m: C.MODE_RATE for m in D.rate_modes()}}
    assert {m: D.sim_twin(m) for m in D.modes() if D.sim_twin(m) != m} == {"dclas": "dclas-strict"}
    # the emulation registers flow sizes for the modes whose scheduler reads them
    assert [m for m in D.modes() if D.clairvoyant(m)] == ["sebf", "hug", "utopia", "sincronia"]
    assert [m for m in D.modes() if CM.dclas_queues(m)] == ["dclas", "fai"]


def test_every_twin_is_a_scheduler_and_a_subclass_is_not_its_parents_mode():
    for m in D.modes():
        assert D.sim_twin(m) in REGISTRY
    assert REGISTRY["dclas-strict"].fabric is None and "dclas-strict" not in D.modes()
    with pytest.raises(ValueError, match="unknown mode 'dclas-strict'"):
        D.fabric("dclas-strict")


def test_a_declaration_is_checked():
    assert Fabric(METERS).pipeline == "rate" and Fabric(FAIR).pipeline == "fair"
    assert Fabric(COORDINATED, "fifo-lm").pipeline == "fifo-lm"
    with pytest.raises(ValueError, match="enforce"):
        Fabric("police")
    with pytest.raises(ValueError, match="coordinated enforcement cannot run the None"):
        Fabric(COORDINATED)
    with pytest.raises(ValueError, match="runs 'rate'"):
        Fabric(QUEUES, "dclas")
    with pytest.raises(ValueError, match="registered twice"):
        register("sebf")(type("Again", (Scheduler,), {}))


@pytest.fixture
def toy_mode():
    """A scheduler registered for the test only: queues only, clairvoyant, emulated by default."""

    @register("toy-order")
    class Toy(Scheduler):
        """Serves coflows in arrival order (a test's)."""

        clairvoyant = True
        fabric = Fabric(QUEUES, twin="fifo", default=True)

        @dataclass(frozen=True)
        class Params:
            pass

        def allocate(self, v):
            return Allocation(np.zeros(v.nflows), order=np.arange(v.ncoflows))
    try:
        yield "toy-order"
    finally:
        del REGISTRY["toy-order"]


def test_a_new_declared_scheduler_is_a_mode_for_every_driver(toy_mode):
    m = toy_mode
    assert D.modes()[-1] == m and m in D.rate_modes() and m in D.default_modes()
    assert D.clairvoyant(m) and D.sim_twin(m) == "fifo" and D.pipeline(m) == "rate"
    p = CM.mode_policy(m)                 # the controller
    assert p.rate and not p.meters and not p.coordinated and p.sched.name == m
    cfg = ER.EmuConfig(trace="x", modes=(m,))
    cfg.validate()                        # the emulation knows it
    assert ER.enforcement(cfg, m).endswith("no rate control")
    assert EF.tm_for_mode(m).queues == 8
    assert not ER.paced(cfg, m)


def test_an_undeclared_scheduler_is_no_mode():
    for m in ("pfp", "dclas-local", "varys-deadline"):
        assert m not in D.modes()
        with pytest.raises(ValueError, match="unknown mode"):
            CM.mode_policy(m)
