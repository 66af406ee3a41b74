"""The tutorial's and the how-to guides' commands run as written.

A page marks each block a test runs with an HTML comment on the line before its fence (invisible
on the site)::

    <!-- test: run -->
    ```bash
    coflow api certs out/howto/tls
    ```

``<!-- test: run needs=etcd,simple_switch_grpc -->`` names programs the block needs (the page is
skipped, saying which, when one is missing). A page's marked blocks run in order as one bash
script (``set -euo pipefail``) from the repository's root with the venv's bin/ first on PATH (the
pages assume an activated venv), in a session of their own that is killed at the end. Blocks that
need switch hardware (a Tofino) are not marked; neither are the long ones (`make run`: the
bare-machine test runs it). The docs/site build is checked by `make docs` (CI)."""
import os
import re
import shutil
import signal
import subprocess
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs")
MARK = re.compile(r"^([ \t]*)<!-- test: run(?: needs=([\w.,-]+))? -->\n\1```bash\n(.*?)^\1```", re.M | re.S)
ISSUE = re.compile(r"\b(issue|issues|session|sessions)\s+#?\d+", re.I)


def _pages(sub: str) -> list[str]:
    d = os.path.join(DOCS, sub)
    return sorted(os.path.join(sub, f) for f in os.listdir(d) if f.endswith(".md"))


def runnable(text: str) -> tuple[list[str], list[str]]:
    """(the marked blocks in order, the programs they need)."""
    blocks, needs = [], []
    for m in MARK.finditer(text):
        needs += [n for n in (m.group(2) or "").split(",") if n]
        blocks.append(textwrap.dedent(m.group(3)))
    return blocks, needs


def test_marker_finds_blocks():
    text = ("x\n<!-- test: run -->\n```bash\necho a\n```\n```bash\necho not run\n```\n"
            "<!-- test: run needs=etcd -->\n```bash\necho b\n```\n"
            "1. step\n\n    <!-- test: run -->\n    ```bash\n    cat <<'X'\n    x\n    X\n    ```\n")
    assert runnable(text) == (["echo a\n", "echo b\n", "cat <<'X'\nx\nX\n"], ["etcd"])


HOWTO_RUN = ["tutorial/first-run.md", "how-to/reproduce-and-dask.md", "how-to/tokens-and-tls.md",
             "how-to/etcd-failover.md", "how-to/shell-and-prometheus.md", "how-to/tofino-stratum.md",
             "how-to/tofino-bf-switchd.md"]


# pages whose steps start BMv2 switches and controllers (the live tests' kind)
LIVE = {"how-to/etcd-failover.md", "how-to/shell-and-prometheus.md"}


@pytest.mark.slow
@pytest.mark.parametrize("page", [pytest.param(p, marks=[pytest.mark.live] if p in LIVE else [])
                                  for p in HOWTO_RUN])
def test_page_commands_run_as_written(page, tmp_path):
    with open(os.path.join(DOCS, page)) as f:
        blocks, needs = runnable(f.read())
    assert blocks, f"{page}: no block marked <!-- test: run -->"
    venv_bin = os.path.join(REPO, ".venv", "bin")
    # the pages assume an activated venv, and the P4 tools on PATH (/opt/p4/bin is where
    # coflow.dataplane.toolchain looks last)
    path = os.pathsep.join([venv_bin, os.environ.get("PATH", ""), "/opt/p4/bin"])
    env = dict(os.environ, PATH=path, VIRTUAL_ENV=os.path.join(REPO, ".venv"),
               COFLOW_SYSTEM_INSTALL="0", PYTHONUNBUFFERED="1")
    missing = [n for n in dict.fromkeys(needs) if shutil.which(n, path=env["PATH"]) is None and not
               (n == "p4info" and os.path.exists(os.path.join(REPO, "build", "coflow.p4info.txt")))]
    if missing:
        pytest.skip(f"{page}: its commands need {', '.join(missing)}, not on this machine")
    script = tmp_path / "steps.sh"
    script.write_text("set -euo pipefail\nset -x\n" + "\n".join(blocks))
    p = subprocess.Popen(["bash", str(script)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=600)
    finally:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    assert p.returncode == 0, f"{page}: its commands failed (exit {p.returncode}):\n{out[-6000:]}"


def test_user_pages_name_no_issue_or_session():
    pages = ["index.md"] + [p for sub in ("tutorial", "how-to", "reference", "explanation")
                            for p in _pages(sub)]
    bad = []
    for p in pages:
        with open(os.path.join(DOCS, p)) as f:
            for i, line in enumerate(f, 1):
                if ISSUE.search(line):
                    bad.append(f"docs/{p}:{i}: {line.strip()[:100]}")
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    bad += [f"README.md: {m.group(0)}" for m in ISSUE.finditer(text)]
    assert not bad, "user pages speak of issue numbers (history goes in CHANGELOG.md):\n" + "\n".join(bad)


def test_readme_is_a_landing_page():
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    assert len(text.splitlines()) <= 200
    assert "make run" in text and "make test" in text


def test_every_page_is_in_the_navigation_or_a_dated_log():
    with open(os.path.join(REPO, "mkdocs.yml")) as f:
        nav = f.read()
    for sub in ("tutorial", "how-to", "reference", "explanation"):
        for p in _pages(sub):
            assert p in nav, f"docs/{p} is not in mkdocs.yml's nav"
    for p in _pages("experiments"):
        assert p == "experiments/index.md" or re.match(r"experiments/\d{4}-\d{2}-\d{2}-[\w-]+\.md$", p), p
