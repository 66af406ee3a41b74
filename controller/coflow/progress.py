"""Progress for people, lines for logs.

A long phase (a simulation, a sweep, a benchmark's rounds, an emulated mode) reports through
:func:`phase`: on a terminal a tqdm bar on stderr; anywhere else (a log file, CI output, a pipe)
exactly two lines, one when the phase starts and one when it ends, with the count and the time::

    with phase("sebf rounds (progress updates)", total=150, unit="round") as p:
        for ...:
            p.update()
            p.set_postfix(updates=n)      # shown on the bar, kept for the closing line

The closing line reads ``<desc>: 150/150 rounds in 3.2 s (updates=40)``. ``bar.write(line)``
prints a line above a live bar (or plainly without one). Nothing else here writes ``\\r``.
"""
from __future__ import annotations

import sys
import time
from typing import IO


def is_terminal(stream: IO | None = None) -> bool:
    s = sys.stderr if stream is None else stream
    try:
        return bool(s.isatty())
    except (AttributeError, ValueError):   # a closed or replaced stream
        return False


class Phase:
    """One phase's progress (see the module's docstring). ``tty`` overrides the terminal test."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "it",
                 stream: IO | None = None, tty: bool | None = None, enabled: bool = True,
                 leave: bool = True):
        self.desc, self.total, self.unit = desc, total, unit
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.n = 0
        self.postfix: dict = {}
        self.t0 = time.monotonic()
        self._bar = None
        self._closed = False
        if not enabled:
            return
        if is_terminal(self.stream) if tty is None else tty:
            try:
                from tqdm import tqdm
            except ImportError:  # pragma: no cover - tqdm is a locked dependency
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream, leave=leave,
                                 dynamic_ncols=True, mininterval=0.5)
                return
        of = f" ({total} {self._units(total)})" if total is not None else ""
        self._line(f"{desc}: started{of}")

    def _units(self, n) -> str:
        return self.unit if n == 1 or self.unit.endswith("s") else self.unit + "s"

    def _line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)

    def set_postfix(self, **kw) -> None:
        self.postfix.update(kw)
        if self._bar is not None:
            self._bar.set_postfix(kw, refresh=False)

    def write(self, text: str) -> None:
        """A line for the reader now (above the bar on a terminal)."""
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        elif self.enabled:
            self._line(text)

    def close(self, status: str | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
            if status:
                self._line(f"{self.desc}: {status}")
            return
        if not self.enabled:
            return
        dt = time.monotonic() - self.t0
        count = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        extra = ", ".join(f"{k}={v}" for k, v in self.postfix.items())
        tail = f" ({extra})" if extra else ""
        if status:
            tail += f": {status}"
        self._line(f"{self.desc}: {count} {self._units(self.n)} in {dt:.1f} s{tail}")

    def __enter__(self) -> "Phase":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(None if exc_type is None else f"stopped by {exc_type.__name__}")


def phase(desc: str, total: int | None = None, unit: str = "it", **kw) -> Phase:
    """A :class:`Phase` (a context manager); see the module's docstring."""
    return Phase(desc, total, unit, **kw)
