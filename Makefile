# The front door: CI calls the same targets a person does.
# `make` alone lists the targets.

CARGO ?= cargo
# `make run CONFIG=path/to.toml` runs on another config; default is the embedded one.
CONFIG ?=
NEXTEST := $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo yes)

.DEFAULT_GOAL := help
.PHONY: help build run fleet test lint fmt doc ci

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

build: ## Build every crate and binary (debug)
	$(CARGO) build --workspace --bins

run: build ## Run the long-lived process (embedded default config unless CONFIG=...)
	./target/debug/mcp-supervisor serve $(if $(CONFIG),--config $(CONFIG),)

fleet: build ## Redis, three nodes on the demo server and HAProxy on loopback; Ctrl-C stops them
	./scripts/fleet.sh

test: build ## Run the whole test suite (installs pinned test servers first)
	./scripts/install-test-deps.sh
ifeq ($(NEXTEST),yes)
	$(CARGO) nextest run --workspace --all-features --no-fail-fast
	$(CARGO) test --workspace --all-features --doc
else
	$(CARGO) test --workspace --all-features --no-fail-fast
endif
	CARGO="$(CARGO)" ./scripts/fuzz.sh short

lint: ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	CARGO="$(CARGO)" ./scripts/fuzz.sh lint

fmt: ## Format the code
	$(CARGO) fmt --all
	$(CARGO) fmt --manifest-path fuzz/Cargo.toml

doc: ## Build the API docs (warnings are errors)
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps -p mcp-supervisor -p mcp-test-support

ci: lint test ## What CI runs

# `make bench [QUICK=1] [ONLY=P1,P5] [PEERS=1]`: the performance targets side by
# side (crates/mcp-bench; targets and results in docs/BENCHMARKS.md). PEERS=1
# adds mcp-proxy 0.6.0 to every P5 row (built once into .tools/, ~9 min).
QUICK ?=
ONLY ?=
PEERS ?=
with = $(filter-out 0,$(1))
BENCH_INVOKED := make bench$(if $(call with,$(QUICK)), QUICK=$(QUICK),)$(if $(ONLY), ONLY=$(ONLY),)$(if $(call with,$(PEERS)), PEERS=$(PEERS),)
.PHONY: bench
bench: ## Benchmarks P1-P12 -> docs/BENCHMARKS.md (QUICK=1 ~5 min, ONLY=P1,P5, PEERS=1)
	./scripts/install-test-deps.sh
	$(if $(call with,$(PEERS)),./scripts/install-peers.sh,)
	$(CARGO) build --release -p mcp-bench -p mcp-test-support -p mcp-supervisor-cli --bins
	$(or $(CARGO_TARGET_DIR),target)/release/mcp-bench $(if $(call with,$(QUICK)),--quick,) $(if $(ONLY),--only $(ONLY),) $(if $(call with,$(PEERS)),--peers,) --invoked-as "$(BENCH_INVOKED)"

# `make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGETS="config_parse gateway_http"]`: libFuzzer
# on every target (or those listed), FUZZ_SECONDS each (docs/TESTING.md, "Fuzzing").
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?=
.PHONY: fuzz
fuzz: ## Long fuzz run: libFuzzer, FUZZ_SECONDS (600) per target
	FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz.sh long $(FUZZ_TARGETS)

# `make soak [SOAK_SECONDS=N]`: faults, hostile input and reloads against the
# whole service, bounded (N <= 540 s of load, ~30 s more to start and stop);
# not part of `make test`. docs/RELIABILITY.md.
SOAK_SECONDS ?= 300
.PHONY: soak
soak: ## Soak under faults (~5 min; SOAK_SECONDS=N), non-zero exit on any finding
	./scripts/install-test-deps.sh
	$(CARGO) build --release -p mcp-bench -p mcp-test-support -p mcp-supervisor-cli --bins
	$(or $(CARGO_TARGET_DIR),target)/release/mcp-bench soak --seconds $(SOAK_SECONDS)
