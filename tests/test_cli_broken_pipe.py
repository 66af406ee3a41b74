"""`coflow ... | head`: a reader that goes away ends the command quietly (exit 1, nothing on
stderr), not with an error line or a traceback."""
import subprocess
import sys

CODE = """
import os, sys
r, w = os.pipe(); os.close(r); os.dup2(w, 1)      # stdout: a pipe nobody reads
import coflow.cli as cli
sys.exit(cli.main(["schedulers"]))
"""


def test_closed_stdout_ends_quietly():
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr == ""
