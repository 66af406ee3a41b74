# In-network coflow scheduler on P4.  `make run` runs the main job, `make test` the tests.
# Each target installs what it needs on first use (a venv at .venv).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
COFLOW := $(VENV)/bin/coflow
SHARED ?= ../shared
FB_TRACE ?= $(SHARED)/traces/FB2010-1Hr-150-0.txt
# Debian's Mininet and python3-thrift live in /usr/bin/python3's site-packages: build the venv
# from it with --system-site-packages so the emulation sees them.
BASE_PYTHON ?= $(shell [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import venv' 2>/dev/null && echo /usr/bin/python3 || command -v python3)

.PHONY: all venv sysdeps lock lock-compile smoke reproduce lint docs docs-ref test-fast stop test test-py run bench bench-sweep bench-ctl bench-scale bench-scale-digest bench-scale-senders bench-failover clean help results results-emu readme \
	shell shell-venv

all: help

help:
	@echo "make run      - main job (emulation when BMv2/p4c are present, else the simulator comparison)"
	@echo "make test     - all tests (Python unit/property tests; PTF tests when the P4 toolchain is present)"
	@echo "make test-fast | lint - the fast loop (no live switches); ruff, mypy and the code's shape"
	@echo "make docs | docs-ref - the documentation site into site/ (mkdocs --strict); its reference pages from the code"
	@echo "make bench    - simulator benchmarks on the FB trace and a 10x generated trace, then bench-sweep"
	@echo "make bench-sweep | bench-ctl | bench-scale | bench-scale-digest | bench-scale-senders | bench-failover"
	@echo "               - sweeps on Dask; controller rounds; controller at scale; HA failover (bench/README.md)"
	@echo "make results | results-emu | readme - results/*.json and the tables rendered from them"
	@echo "make reproduce FIGS=\"NAME...\" - the seeds' figures on Dask (REPRODUCTION.md; no FIGS: all)"
	@echo "make p4 | ptf | bench-p4 - P4 data plane (docs/reference/p4.md)"
	@echo "make p4-tofino | p4-tofino-fit | p4-tofino-sweep - the TNA program with bf-p4c, its fit (docs/reference/results.md)"
	@echo "make shell SW=<switch> - p4runtime-shell (read-only backup client) on a switch a running controller manages"
	@echo "make lock | lock-compile - move the dependency lock forward (requirements/README.md)"
	@echo "make smoke    - every target above at a tiny size (CI runs it in make test)"
	@echo "make stop | clean - stop what a run left; remove build/ and out/"

# The venv gets exactly the locked versions (requirements/dev.txt: every extra, hashes for every
# file), then the project itself without its dependencies; requirements/check.py then refuses a
# venv whose installed versions differ from the lock. `make lock` moves the lock forward
# (requirements/README.md).
LOCK := requirements/dev.txt
$(VENV)/.installed: pyproject.toml $(LOCK)
	@test -x $(PY) || $(BASE_PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) requirements/check.py $(LOCK)
	@touch $@

venv: $(VENV)/.installed

# Debian packages the emulation and the live tests use (Mininet, ethtool, iproute2, ...): installed
# with apt on first use when root, else one line naming them and their tests skip.
# COFLOW_SYSTEM_INSTALL=0 turns the install off (controller/coflow/sysdeps.py).
sysdeps: $(VENV)/.installed
	@$(PY) -m coflow.sysdeps ensure

test-py: $(VENV)/.installed sysdeps
	@$(MAKE) --no-print-directory p4-if-available
	-@$(MAKE) --no-print-directory -s shell-venv
	$(PY) -m pytest -q tests

test: test-py
	@$(MAKE) --no-print-directory p4-tests-or-skip

# p4runtime-shell in a venv of its own (it pins p4runtime and protobuf): `make shell SW=e0` opens it
# as a backup client on a switch of a running `coflow ctl run --metrics 127.0.0.1:9100`
# (SHELL_ARGS="--status-file F" or "--addr unix:/... --device-id N" otherwise);
# tests/test_ctl_shell.py reads what the controller wrote through it (skips, saying so, without it).
SHELL_VENV ?= .venv-shell
SHELL_LOCK := requirements/shell.txt
$(SHELL_VENV)/.installed: $(SHELL_LOCK)
	@test -x $(SHELL_VENV)/bin/python || $(BASE_PYTHON) -m venv $(SHELL_VENV)
	$(SHELL_VENV)/bin/python -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r $(SHELL_LOCK)
	$(SHELL_VENV)/bin/python requirements/check.py $(SHELL_LOCK)
	@touch $@

shell-venv: $(SHELL_VENV)/.installed

shell: $(VENV)/.installed $(SHELL_VENV)/.installed
	@COFLOW_SHELL_VENV=$(abspath $(SHELL_VENV)) $(PY) -m coflow.ctl.shell $(SW) $(SHELL_ARGS)

# ruff (pyflakes, pycodestyle, bugbear, blind excepts), mypy over the package and the code's shape
# (no import circle in controller/, no Python file outside tests/ over 800 lines:
# controller/coflow/devtools/layout.py); CI runs it.
LINT_PATHS := controller tests bench mininet ptf-tests p4src/bench requirements
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy
	$(PY) -m coflow.devtools.layout

# The fast loop: no live switches, no root, no Mininet, no long runs (markers in tests/conftest.py).
test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not live and not slow" tests

# Stop what a run or a test may have left: emulation switches, their veths, PTF namespaces.
stop:
	-@if [ -x $(COFLOW) ]; then $(COFLOW) emu clean; fi
	-@for ns in $$(ip netns list 2>/dev/null | awk '/^(coflow-ptf|cfctl)/ {print $$1}'); do \
	  ip netns pids $$ns 2>/dev/null | xargs -r kill; ip netns del $$ns && echo "stop: removed netns $$ns"; done; true

# The emulation when p4c/BMv2, Mininet and root are there (k=4 fat-tree, FB trace prefix, five
# modes, emulated vs simulated table; RUN_ARGS="--coflows 30 --modes fair,dclas" to change),
# else one line saying why and the simulator comparison.
run: $(VENV)/.installed sysdeps
	FB_TRACE=$(FB_TRACE) $(COFLOW) run $(RUN_ARGS)

# BENCH_ARGS="--schedulers sebf --reschedule coflow --skip-10x --same-time" to choose; with
# COFLOWSIM_CMD set, CoflowSim runs side by side (bench/bench_sim.py's docstring)
bench: $(VENV)/.installed
	$(PY) bench/bench_sim.py --trace $(FB_TRACE) --out out/bench $(BENCH_ARGS)
	@$(MAKE) --no-print-directory bench-sweep

# sweeps on Dask: the Fig. 12 grid with 1 and 2 local workers (speed-up, per-task engine overhead);
# SWEEP_ARGS="--reproduce-all" also times `coflow reproduce --all --workers 2` from an empty cache
bench-sweep: $(VENV)/.installed
	FB_TRACE=$(FB_TRACE) $(PY) bench/bench_sweep.py --out out/bench $(SWEEP_ARGS)
	$(COFLOW) results save --kind sweep out/bench/bench_sweep.json -o results/bench-sweep.json \
	  --command "make bench-sweep$(if $(SWEEP_ARGS), SWEEP_ARGS=\"$(SWEEP_ARGS)\")"
	@$(MAKE) --no-print-directory readme

# controller: SEBF+MADD round (100 coflows / 10k flows) and D-CLAS coordination over a k=4
# fat-tree's 8 edges (20 BMv2 processes; needs `make p4` and simple_switch_grpc)
bench-ctl: $(VENV)/.installed
	@test -f build/coflow.json || $(MAKE) --no-print-directory p4
	$(PY) bench/bench_ctl.py --out out/bench/bench_ctl.json $(CTL_ARGS)

# the controller at scale: D-CLAS / SEBF rounds vs N edges (8..1,024; BMv2 up to 32 edges, emulated
# P4Runtime switches (bench/p4rt_emu.py) at every N), then results/ctl-scale.json + .png and
# the controller log's table re-rendered (docs/experiments/2026-11-26-controller.md). SCALE_ARGS="--edges 8,32 --rounds 20" to choose.
bench-scale: $(VENV)/.installed
	@test -f build/coflow.json || $(MAKE) --no-print-directory p4
	$(PY) bench/bench_scale.py --out out/bench/bench_scale.json $(SCALE_ARGS)
	$(COFLOW) results save --kind scale out/bench/bench_scale.json -o results/ctl-scale.json \
	  --command "make bench-scale$(if $(SCALE_ARGS), SCALE_ARGS=\"$(SCALE_ARGS)\")"
	$(COFLOW) results readme --readme docs/experiments/2026-11-26-controller.md

# report digests against the default path alone (D-CLAS at 8 edges, BMv2 driven by
# packets and emulated; bench/bench_scale.py bench_dclas_digest): results/ctl-scale-digest.json and
# its table in the controller log (`make bench-scale` runs it too, variant `digest`)
bench-scale-digest: $(VENV)/.installed
	@test -f build/coflow.json || $(MAKE) --no-print-directory p4
	$(PY) bench/bench_scale.py --edges 8 --coflows 100,1000 --modes dclas --variants digest --rounds 40 \
	  --out out/bench/bench_scale_digest.json $(SCALE_ARGS)
	$(COFLOW) results save --kind scale out/bench/bench_scale_digest.json -o results/ctl-scale-digest.json \
	  --command "make bench-scale-digest$(if $(SCALE_ARGS), SCALE_ARGS=\"$(SCALE_ARGS)\")"
	$(COFLOW) results readme --readme docs/experiments/2026-11-26-controller.md

# overrides only where a coflow sends (default, `push`) against on every edge whose
# local queue differs (`alledges`, the rule before), same run: D-CLAS at 128-1,024 emulated edges and
# at 8 BMv2 edges (polled, and on report digests: `digest` against `digestall`), 100 coflows, both
# placements (every coflow on every edge; FB-trace widths):
# results/ctl-scale-senders.json and its table in the controller log
bench-scale-senders: $(VENV)/.installed
	@test -f build/coflow.json || $(MAKE) --no-print-directory p4
	$(PY) bench/bench_scale.py --edges 128,512,1024 --large 128 --coflows 100 --modes dclas --bmv2-max 0 \
	  --large-variants push,alledges --large-rounds 8 --trace $(FB_TRACE) --out out/bench/bench_scale_senders.json $(SCALE_ARGS)
	$(PY) bench/bench_scale.py --edges 8 --coflows 100 --modes dclas --bmv2-max 8 --emulated-min 9 \
	  --variants push,alledges,digest --digest-variants digest,digestall --digest-placements all,fb \
	  --rounds 40 --trace $(FB_TRACE) --append --out out/bench/bench_scale_senders.json $(SCALE_ARGS)
	$(COFLOW) results save --kind scale out/bench/bench_scale_senders.json -o results/ctl-scale-senders.json \
	  --command "make bench-scale-senders$(if $(SCALE_ARGS), SCALE_ARGS=\"$(SCALE_ARGS)\")"
	$(COFLOW) results readme --readme docs/experiments/2026-11-26-controller.md

# controller failover across "machines" on etcd: two controllers in namespaces, a
# 3-member etcd on loopback, kills of the primary and of one etcd member; ends with
# "failover: takeover X s, acked N, lost M" (needs root, etcd-server, `make p4`)
bench-failover: $(VENV)/.installed sysdeps
	@test -f build/coflow.json || $(MAKE) --no-print-directory p4
	$(PY) bench/bench_failover.py --out out/bench/failover.json $(FAILOVER_ARGS)

# README.md's results tables are rendered from results/*.json (small summaries of runs; see
# controller/coflow/results.py). `make results` reruns the simulator comparisons (bundled trace,
# and the FB trace when ../shared has it: about 10 minutes) and re-renders README.md;
# `make results-emu` saves the last `make run` emulation; `make readme` only re-renders.
SIM_CMD = $(COFLOW) compare --quiet
results: $(VENV)/.installed
	$(SIM_CMD) --trace traces/fb-like-120x16.txt --json out/results/sim-bundled.json --plots out/results/bundled
	$(COFLOW) results save --kind sim out/results/sim-bundled.json -o results/sim-bundled.json \
	  --command "coflow compare --trace traces/fb-like-120x16.txt"
	@if [ -f $(FB_TRACE) ]; then \
	  $(SIM_CMD) --trace $(FB_TRACE) --json out/results/sim-fb.json --plots out/results/fb && \
	  $(COFLOW) results save --kind sim out/results/sim-fb.json -o results/sim-fb.json \
	    --command "coflow compare --trace FB2010-1Hr-150-0.txt" && \
	  $(SIM_CMD) --trace $(FB_TRACE) --schedulers sebf,dclas-strict --set fair.max_concurrent=5 \
	    --json out/results/sim-fb-cap5.json && \
	  $(COFLOW) results save --kind sim out/results/sim-fb-cap5.json -o results/sim-fb-cap5.json \
	    --command "coflow compare --trace FB2010-1Hr-150-0.txt --schedulers sebf,dclas-strict --set fair.max_concurrent=5"; \
	else echo "results: $(FB_TRACE) not found: results/sim-fb.json kept"; fi
	@$(MAKE) --no-print-directory readme

# EMU_RUNS="out/run/compare.json runs/2/compare.json ...": several runs of one build, saved as
# the first's table and every run's gains as median and range
EMU_RUNS ?= out/run/compare.json
results-emu: $(VENV)/.installed
	$(COFLOW) results save --kind emu $(EMU_RUNS) -o results/emu-fattree.json --command "make run"
	@$(MAKE) --no-print-directory readme

RESULTS_PAGES := README.md docs/reference/results.md docs/experiments/2026-11-26-controller.md
readme: $(VENV)/.installed
	@for f in $(RESULTS_PAGES); do $(COFLOW) results readme --readme $$f || exit 1; done

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or a page
# missing from the navigation fails the build (CI runs it). `make docs-ref` regenerates the
# reference pages from the code (python -m coflow.docgen; tests/test_docs_reference.py checks them).
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d site

docs-ref: $(VENV)/.installed
	$(PY) -m coflow.docgen

# Move the lock forward: re-resolve every dependency to the newest versions pyproject.toml's
# ranges allow (uv, pinned here, in a venv of its own), rebuild both venvs from the new lock, run
# the tests and every target's smoke run. Commit requirements/*.txt only when all of it passes.
# LOCK_UPGRADE="--upgrade-package numpy" moves one package; LOCK_UPGRADE= re-locks without moving
# (after a pyproject.toml edit).
UV_VERSION ?= 0.13.9
LOCK_VENV ?= .venv-lock
LOCK_UPGRADE ?= --upgrade
LOCK_FLAGS := --universal --python-version 3.11 --generate-hashes --quiet
$(LOCK_VENV)/bin/uv:
	@test -x $(LOCK_VENV)/bin/python || $(BASE_PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)"

lock-compile: $(LOCK_VENV)/bin/uv
	$(LOCK_VENV)/bin/uv pip compile pyproject.toml requirements/build.in --all-extras $(LOCK_FLAGS) \
	  $(LOCK_UPGRADE) -o $(LOCK)
	$(LOCK_VENV)/bin/uv pip compile requirements/shell.in $(LOCK_FLAGS) $(LOCK_UPGRADE) -o $(SHELL_LOCK)

lock: lock-compile
	rm -rf $(VENV) $(SHELL_VENV)
	$(MAKE) --no-print-directory test
	$(MAKE) --no-print-directory smoke
	@git diff --stat -- requirements/

# the seeds' figures (REPRODUCTION.md): FIGS="varys-sec74-fifo aalo-fig12-sensitivity" or all of
# them; REPRODUCE_ARGS="--scheduler tcp://HOST:8786" for a Dask cluster, "--workers N" locally
FIGS ?=
REPRODUCE_ARGS ?=
reproduce: $(VENV)/.installed
	FB_TRACE=$(FB_TRACE) $(COFLOW) reproduce $(if $(strip $(FIGS)),$(FIGS),--all) $(REPRODUCE_ARGS)

# every target of `make help` once at a tiny size, in a scratch copy of this tree (nothing here
# changes): tests/test_make_targets.py, which `make test` runs too
smoke: $(VENV)/.installed
	$(PY) -m pytest -q tests/test_make_targets.py $(SMOKE_ARGS)

clean: stop
	rm -rf build out .pytest_cache

-include mk/p4.mk
-include mk/tofino.mk

# Fallbacks when the data-plane fragment is not there.
p4-tests-or-skip::
	@true
p4-if-available::
	@true
