"""Progress for people, lines for logs (coflow.progress): a bar on a terminal, exactly one line
when a phase starts and one when it ends anywhere else, never a carriage return in a log."""
import io

import pytest

from coflow.progress import phase


def test_log_output_is_two_lines_per_phase():
    out = io.StringIO()
    with phase("sebf rounds", 150, "round", stream=out) as p:
        for k in range(150):
            p.update()
            p.set_postfix(mismatched=0, last=k)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 2, lines
    assert lines[0] == "sebf rounds: started (150 rounds)"
    assert lines[1].startswith("sebf rounds: 150/150 rounds in ")
    assert lines[1].endswith(" s (mismatched=0, last=149)")


def test_written_lines_and_a_phase_without_total():
    out = io.StringIO()
    p = phase("sweep", unit="task", stream=out)
    p.update(3)
    p.write("sweep: task failed: x")
    p.close()
    p.close()   # closing twice writes nothing more
    lines = out.getvalue().splitlines()
    assert lines[0] == "sweep: started"
    assert lines[1] == "sweep: task failed: x"
    assert lines[2].startswith("sweep: 3 tasks in ")
    assert len(lines) == 3


def test_an_exception_says_the_phase_stopped():
    out = io.StringIO()
    with pytest.raises(KeyError):
        with phase("emu dclas", 10, "coflow", stream=out) as p:
            p.update(4)
            raise KeyError("x")
    assert out.getvalue().splitlines()[-1].endswith(": stopped by KeyError")
    assert "4/10 coflows" in out.getvalue()


def test_terminal_gets_a_bar_not_lines():
    out = io.StringIO()
    with phase("sim sebf", 50, "coflow", stream=out, tty=True) as p:
        for _ in range(50):
            p.update()
    text = out.getvalue()
    assert "\r" in text                      # tqdm redraws in place
    assert "started" not in text and "50/50" in text


def test_disabled_phase_is_silent():
    out = io.StringIO()
    with phase("quiet", 5, stream=out, enabled=False) as p:
        p.update(5)
        p.write("not shown")
    assert out.getvalue() == ""
