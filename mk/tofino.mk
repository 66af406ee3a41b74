# Tofino (TNA) data plane (issue 17), included by the top-level Makefile.
#   make p4-tofino        compile p4src/tna/coflow_tna.p4 with the open-source Tofino backend
#                         (bf-p4c, else p4c-barefoot) into build/tofino/ (ports translated for
#                         Stratum): a standard P4Info, bfrt.json, pipe/context.json,
#                         pipe/tofino.bin, pipe/logs/ (resources); and into
#                         build/tofino-bf_switchd/ with -DTNA_UNTRANSLATED_PORTS (SDK ports, 9
#                         bits: bf_switchd's P4Runtime server translates nothing)
#   make p4-tofino-fit    the fit table from build/tofino/pipe/logs, written into docs/reference/results.md
#   make p4-tofino-sweep  compile with 2^15 .. 2^18 hashed slots (2x that in all) into
#                         build/tofino-sweep/<bits>/, say which fit, write
#                         results/tofino_sweep.json and render it into
#                         docs/reference/results.md (python -m coflow.tofino sweep)
# The compiler is found by controller/coflow/dataplane/toolchain.py: $BF_P4C, PATH, /opt/p4/bin.
# Without it each target prints one line saying so (and make test's Tofino tests skip).

TOFINO_BUILD := build/tofino
TOFINO_BFSWITCHD_BUILD := build/tofino-bf_switchd
TOFINO_MAIN := p4src/tna/coflow_tna.p4
TOFINO_P4INFO := $(TOFINO_BUILD)/coflow_tna.p4info.txt
TOFINO_STAMP := $(TOFINO_BUILD)/.compiled
TOFINO_BFSWITCHD_STAMP := $(TOFINO_BFSWITCHD_BUILD)/.compiled
TOFINO_SOURCES := $(shell find p4src/tna p4src/include -name '*.p4' 2>/dev/null)
TOFINO_TOOLCHAIN := PYTHONPATH=controller $(shell command -v python3) -m coflow.dataplane.toolchain
BF_P4C_BIN = $(shell $(TOFINO_TOOLCHAIN) --print tofino)
TOFINO_MISSING = bf-p4c not found (set BF_P4C, or put bf-p4c / p4c-barefoot on PATH or in /opt/p4/bin)
# extra compiler flags, e.g. TOFINO_FLAGS=-DTNA_HASH_SLOT_BITS=16
TOFINO_FLAGS ?=
TOFINO_SWEEP_BITS ?= 15 16 17 18
# --p4runtime-force-std-externs: standard P4Info messages for counters, meters, registers and
# action profiles (without it, Tofino externs are barefoot.* messages the controller cannot use)
TOFINO_COMPILE = $(BF_P4C_BIN) --target tofino --arch tna --std p4-16 -g $(TOFINO_FLAGS) \
	  --bf-rt-schema $(1)/bfrt.json \
	  --p4runtime-files $(1)/coflow_tna.p4info.txt --p4runtime-force-std-externs \
	  -o $(1) $(TOFINO_MAIN)

.PHONY: p4-tofino p4-tofino-fit p4-tofino-sweep

p4-tofino:
	@if [ -z "$(BF_P4C_BIN)" ]; then echo "p4-tofino: $(TOFINO_MISSING)"; \
	else $(MAKE) --no-print-directory $(TOFINO_STAMP) $(TOFINO_BFSWITCHD_STAMP); fi

$(TOFINO_STAMP): $(TOFINO_SOURCES)
	@mkdir -p $(TOFINO_BUILD)
	$(call TOFINO_COMPILE,$(TOFINO_BUILD))
	@touch $@

$(TOFINO_BFSWITCHD_STAMP): $(TOFINO_SOURCES)
	@mkdir -p $(TOFINO_BFSWITCHD_BUILD)
	$(call TOFINO_COMPILE,$(TOFINO_BFSWITCHD_BUILD)) -DTNA_UNTRANSLATED_PORTS
	@touch $@

p4-tofino-fit: $(VENV)/.installed p4-tofino
	@if [ -z "$(BF_P4C_BIN)" ]; then echo "p4-tofino-fit: $(TOFINO_MISSING)"; \
	else $(PY) -m coflow.tofino fit $(TOFINO_BUILD) --readme docs/reference/results.md; fi

p4-tofino-sweep: $(VENV)/.installed
	@if [ -z "$(BF_P4C_BIN)" ]; then echo "p4-tofino-sweep: $(TOFINO_MISSING)"; exit 0; fi; \
	for b in $(TOFINO_SWEEP_BITS); do \
	  d=build/tofino-sweep/$$b; log=build/tofino-sweep/$$b.log; rm -rf $$d; mkdir -p $$d; \
	  if $(MAKE) --no-print-directory -s _tofino-sweep-one SWEEP_DIR=$$d SWEEP_BITS=$$b \
	       > $$log 2>&1; then \
	    echo "p4-tofino-sweep: $$((2 << $$b)) slots ($$b hashed-slot bits): fits ($$d)"; \
	  else echo "p4-tofino-sweep: $$((2 << $$b)) slots ($$b hashed-slot bits): does not fit ($$log):"; \
	    grep -i "error" $$log | grep -v "^0 errors" | head -3 | sed 's/^/    /'; fi; \
	done; \
	$(PY) -m coflow.tofino sweep build/tofino-sweep --bits $(TOFINO_SWEEP_BITS) \
	  --compiler "$$($(BF_P4C_BIN) --version 2>/dev/null | head -1)" \
	  --json results/tofino_sweep.json --readme docs/reference/results.md >/dev/null

_tofino-sweep-one:
	$(call TOFINO_COMPILE,$(SWEEP_DIR)) -DTNA_HASH_SLOT_BITS=$(SWEEP_BITS)

# `make test` compiles the TNA program first when the compiler is there; the Tofino tests
# (tests/test_tofino_*.py) skip with the reason otherwise.
p4-if-available::
	@if [ -n "$(BF_P4C_BIN)" ]; then $(MAKE) --no-print-directory p4-tofino; \
	else echo "p4-tofino: $(TOFINO_MISSING): the Tofino compile tests will skip"; fi
