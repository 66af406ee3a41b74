# P4 data plane (issue 7), included by the top-level Makefile.
#   make p4        compile p4src/coflow.p4 with p4c-bm2-ss -> build/coflow.json + build/coflow.p4info.txt
#   make ptf       PTF tests against simple_switch_grpc --priority-queues 8 in a namespace it owns
#                  (PTF_TESTS="test_dclas" to select; PTF_SWITCH_LOG=trace for a per-packet log)
#   make bench-p4  packets/s of coflow.p4 vs a minimal L3 program on the same BMv2, as a ratio
#   make p4-tests-count   how many PTF tests exist
# A full `make ptf` that passes and every `make bench-p4` save their summaries (results/p4-ptf.json,
# results/p4-bench.json) and re-render the results pages (make readme) from them; P4_SAVE=0
# (what `make test` passes) keeps results/ as it is.
# The toolchain is found by controller/coflow/dataplane/toolchain.py: $P4C / $SIMPLE_SWITCH_GRPC,
# PATH, then /opt/p4/bin.

P4_BUILD := build
P4_MAIN := p4src/coflow.p4
P4_JSON := $(P4_BUILD)/coflow.json
P4_INFO := $(P4_BUILD)/coflow.p4info.txt
P4_BENCH_JSON := $(P4_BUILD)/l3fwd.json
P4_BENCH_INFO := $(P4_BUILD)/l3fwd.p4info.txt
P4_SOURCES := $(shell find p4src -name '*.p4' -not -path 'p4src/bench/*' 2>/dev/null)
# toolchain lookup needs only the standard library: usable before the venv exists
P4_TOOL_PY := $(shell command -v python3)
P4_TOOLCHAIN := PYTHONPATH=controller $(P4_TOOL_PY) -m coflow.dataplane.toolchain
P4C_BIN = $(shell $(P4_TOOLCHAIN) --print p4c-bm2-ss)
PTF_TESTS ?=
P4_SAVE ?= 1

.PHONY: p4 ptf bench-p4 p4-tests-count p4-toolchain-check p4c-check p4-if-available

p4-toolchain-check:
	@$(P4_TOOLCHAIN) --check

p4c-check:
	@test -n "$(P4C_BIN)" || { echo "p4c-bm2-ss not found (set P4C, or put it on PATH or in /opt/p4/bin)"; exit 1; }

p4: $(P4_JSON)

$(P4_JSON): $(P4_SOURCES) | p4c-check
	@mkdir -p $(P4_BUILD)
	$(P4C_BIN) --target bmv2 --arch v1model --std p4-16 --Wdisable=deprecated \
	  --p4runtime-files $(P4_INFO) -o $(P4_JSON) $(P4_MAIN)

$(P4_BENCH_JSON): p4src/bench/l3fwd.p4 | p4c-check
	@mkdir -p $(P4_BUILD)
	$(P4C_BIN) --target bmv2 --arch v1model --std p4-16 --Wdisable=deprecated \
	  --p4runtime-files $(P4_BENCH_INFO) -o $(P4_BENCH_JSON) $<

ptf: $(VENV)/.installed $(P4_JSON) | p4-toolchain-check
	$(PY) ptf-tests/runner.py --p4info $(P4_INFO) --json $(P4_JSON) --summary out/ptf/summary.json $(PTF_TESTS)
	@if [ "$(P4_SAVE)" = 1 ] && [ -z "$(PTF_TESTS)" ]; then \
	  $(COFLOW) results save --kind ptf out/ptf/summary.json -o results/p4-ptf.json --command "make ptf" && \
	  $(MAKE) --no-print-directory readme; fi

bench-p4: $(VENV)/.installed $(P4_JSON) $(P4_BENCH_JSON) | p4-toolchain-check
	$(PY) p4src/bench/bench_p4.py --coflow $(P4_JSON) --coflow-p4info $(P4_INFO) \
	  --l3fwd $(P4_BENCH_JSON) --l3fwd-p4info $(P4_BENCH_INFO) --json out/bench/bench_p4.json $(P4_BENCH_ARGS)
	@if [ "$(P4_SAVE)" = 1 ]; then \
	  $(COFLOW) results save --kind bench-p4 out/bench/bench_p4.json -o results/p4-bench.json --command "make bench-p4" && \
	  $(MAKE) --no-print-directory readme; fi

p4-tests-count:
	@$(P4_TOOL_PY) ptf-tests/count_tests.py

# `make test` calls this: the PTF tests when the toolchain is present, else one skip line.
p4-tests-or-skip::
	@reason=$$($(P4_TOOLCHAIN) --check); \
	if [ $$? -eq 0 ]; then $(MAKE) --no-print-directory ptf P4_SAVE=0; \
	else echo "p4: skipped $$($(P4_TOOL_PY) ptf-tests/count_tests.py) PTF tests: $$reason"; fi

# `make test` compiles the pipeline first when p4c is there, so that the controller's and the
# emulation's live tests run for real; without p4c they skip and say why.
p4-if-available::
	@if [ -n "$(P4C_BIN)" ]; then $(MAKE) --no-print-directory p4; \
	else echo "p4: p4c-bm2-ss not found: the live controller and emulation tests will skip"; fi
