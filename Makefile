# ax — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
SQLC := $(GO) run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1
OAPI_CODEGEN := $(GO) run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2
AX := bin/ax
# The TypeScript client: its npm packages are pinned by package-lock.json.
TS := openapi/ts
# The TypeScript agent SDK, on that client.
TS_AGENT := agent/ts
# The web console's browser test (Playwright driving Chromium): its npm
# packages too.
CONSOLE_TEST := tests/e2e/console
# The spec's linters (Redocly, Spectral): their npm packages too.
SPEC_LINT := openapi/lint
# Tests start processes and databases: keep the suite inside 10 minutes.
TEST_TIMEOUT ?= 9m
# How many test packages run at once (go test -p; its default is the number
# of CPUs): the end-to-end packages (tests/e2e and tests/e2e/cluster) mostly
# wait on their processes, so on two cores a third package keeps both busy
# meanwhile.
TEST_P ?= 3
BENCH ?= .
BENCH_COUNT ?= 3
# How long each fuzz target runs in `make fuzz`, and in `make test`
# (TEST_FUZZ_*: a smoke run beside the tests, whose seeds run as tests
# anyway; the long search is `make fuzz`).
# Fuzz budgets are counts, not durations: with a duration, Go 1.26's fuzz
# coordinator can fail a target with a bare "context deadline exceeded" when a
# worker is mid-call at the deadline on a loaded machine (golang/go#75804, fixed
# in Go 1.27). One worker per target: the two targets run at once on two cores.
FUZZ_JOB_EXECS ?= 200000x
FUZZ_CRON_EXECS ?= 1000000x
TEST_FUZZ_JOB_EXECS ?= 20000x
TEST_FUZZ_CRON_EXECS ?= 60000x
FUZZ_RESULT_EXECS ?= 20000x
TEST_FUZZ_RESULT_EXECS ?= 1000x

.DEFAULT_GOAL := help
.PHONY: help run test faults fuzz bench generate verify lint lint-spec build schema ts-deps console-deps lint-deps

help: ## Show the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## Build bin/ax and bin/ax-agent.
	@mkdir -p bin
	$(GO) build -o bin/ ./cmd/...

run: build ## Start ax (local Postgres unless DATABASE_URL is set); prints the URL, docs and a dev key.
	$(AX) dev

# The fuzz targets run beside the tests, filling the CPU that packages waiting
# on real time leave idle; each target's output is printed when it ends.
test: build ## Run every test with -race against Postgres (DATABASE_URL, 127.0.0.1:5432, or a throwaway cluster), and fuzz meanwhile.
	@# tests/e2e runs the TypeScript client and the console's browser test with node: their packages first.
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory ts-deps console-deps; \
	else echo "npm is not on PATH: the TypeScript client and web console browser tests skip (fail with CI set)"; fi
	@$(MAKE) --no-print-directory lint-spec
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-go fuzz-job fuzz-cron fuzz-result \
	  FUZZ_JOB_EXECS=$(TEST_FUZZ_JOB_EXECS) FUZZ_CRON_EXECS=$(TEST_FUZZ_CRON_EXECS) \
	  FUZZ_RESULT_EXECS=$(TEST_FUZZ_RESULT_EXECS)

.PHONY: test-go
# The race detector sleeps in the main goroutine before a binary exits
# (GORACE's atexit_sleep_ms, 1000 ms by default): a second per test package,
# holding one of the -p slots. A race seen during a test fails that test
# whatever this is (the testing package checks after each test).
test-go: export GORACE ?= atexit_sleep_ms=0
test-go:
	@# The end-to-end packages first: their longest tests run up to a minute of wall clock, they must not start last.
	$(AX) dev exec -- $(GO) test -race -count=1 -p $(TEST_P) -timeout $(TEST_TIMEOUT) ./tests/e2e/cluster/ ./tests/e2e/ ./...

faults: build ## Run the fault tests too long for make test: failover to a promoted synchronous standby (Postgres 15 binaries).
	$(GO) test -tags faults -count=1 -timeout 15m -run 'TestFailover' ./tests/e2e/cluster/

fuzz: build ## Fuzz job definitions (JSON → validation → store → fire), cron + time-zone parsing and task results through complete (FUZZ_JOB_EXECS, FUZZ_CRON_EXECS, FUZZ_RESULT_EXECS), all at once.
	@$(MAKE) --no-print-directory -j3 --output-sync=target fuzz-job fuzz-cron fuzz-result

.PHONY: fuzz-job fuzz-cron fuzz-result
fuzz-job:
	$(AX) dev exec -- $(GO) test -run '^$$' -fuzz '^FuzzJobDefinition$$' -fuzztime $(FUZZ_JOB_EXECS) -parallel 1 ./openapi/
fuzz-cron:
	$(GO) test -run '^$$' -fuzz '^FuzzParseZone$$' -fuzztime $(FUZZ_CRON_EXECS) -parallel 1 ./queue/cron/
fuzz-result:
	$(AX) dev exec -- $(GO) test -run '^$$' -fuzz '^FuzzResultPath$$' -fuzztime $(FUZZ_RESULT_EXECS) -parallel 1 ./openapi/

bench: build ## Run the benchmarks (BENCH=regexp, BENCH_COUNT=n); output is benchstat-readable.
	$(AX) dev exec -- $(GO) test -run '^$$' -bench '$(BENCH)' -count $(BENCH_COUNT) -timeout 60m ./...

# generate builds nothing before the code it generates: cmd/ax needs the
# client, the client needs the spec.
generate: ts-deps ## Regenerate sqlc code, the OpenAPI specs, the Go and TypeScript clients and sql/schema.sql.
	cd sql && $(SQLC) generate
	$(GO) run ./openapi/specgen --dir openapi
	cd openapi/client && $(OAPI_CODEGEN) -config oapi-codegen.yaml ../openapi-3.0.yaml
	cd $(TS) && npm run --silent generate
	$(MAKE) --no-print-directory schema

# The history partitions and the partitions of events, callbacks, attempts
# and skip records are left out of the dump: they are named after the
# day the migration ran, so the dump would change every day.
schema: build ## Dump the migrated schema to sql/schema.sql (for reading; migrations are the truth).
	$(AX) dev exec -- bash -c 'set -euo pipefail; db=ax_schema_dump_$$$$; \
	  psql -q "$$DATABASE_URL" -c "CREATE DATABASE $$db"; \
	  url=$$(sed -E "s#/[^/?]*(\?|$$)#/$$db\1#" <<<"$${DATABASE_URL##*://}"); url="postgres://$$url"; \
	  trap "psql -q \"$$DATABASE_URL\" -c \"DROP DATABASE $$db WITH (FORCE)\"" EXIT; \
	  $(AX) migrate --database-url "$$url" up >/dev/null; \
	  pg_dump --schema-only --no-owner --no-privileges --schema=ax \
	    --exclude-table="ax.execution_h2*" --exclude-table="ax.task_h2*" \
	    --exclude-table="ax.task_event_p*" --exclude-table="ax.callback_p*" \
	    --exclude-table="ax.callback_attempt_p*" --exclude-table="ax.skipped_fire_p*" "$$url" \
	    | grep -vE "^(-- Dumped|SET |SELECT pg_catalog.set_config|\\\\(un)?restrict )" | cat -s > sql/schema.sql'

verify: generate lint ## Regenerate everything, then fail if anything changed.
	cd $(TS) && npm run --silent build
	cd $(TS_AGENT) && npm run --silent check
	git diff --exit-code -- . ':!go.sum'
	@test -z "$$(git status --porcelain --untracked-files=all -- db/internal openapi sql)" || { git status --porcelain -- db/internal openapi sql; exit 1; }

# npm ci again when the lock file is newer than the installed packages.
# The TypeScript agent SDK (agent/ts) is built on the client: its packages
# too (its dependency on the client is a link to openapi/ts).
ts-deps: $(TS)/node_modules/.package-lock.json $(TS_AGENT)/node_modules/.package-lock.json ## Install the TypeScript client's and agent SDK's npm packages (npm ci in openapi/ts and agent/ts).
$(TS)/node_modules/.package-lock.json: $(TS)/package.json $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund
	@touch $@
$(TS_AGENT)/node_modules/.package-lock.json: $(TS_AGENT)/package.json $(TS_AGENT)/package-lock.json
	cd $(TS_AGENT) && npm ci --no-audit --no-fund
	@touch $@

# Playwright without a browser of its own (playwright-core): the test
# drives the machine's Chromium (Debian's package chromium).
console-deps: $(CONSOLE_TEST)/node_modules/.package-lock.json ## Install the console browser test's npm packages (npm ci in tests/e2e/console).
$(CONSOLE_TEST)/node_modules/.package-lock.json: $(CONSOLE_TEST)/package.json $(CONSOLE_TEST)/package-lock.json
	cd $(CONSOLE_TEST) && npm ci --no-audit --no-fund
	@touch $@

# Redocly with its recommended rules and Spectral with spectral:oas, both
# at 0 errors and 0 warnings (openapi/lint holds their configuration).
# Without npm this is skipped, and fails when CI is set. Redocly's usage
# telemetry is off: tests send nothing beyond this machine.
lint-spec: ## Lint openapi/openapi.yaml with Redocly (recommended) and Spectral (spectral:oas).
	@if ! command -v npm >/dev/null; then \
	  if [ -n "$$CI" ]; then echo "npm is not on PATH: cannot lint the spec"; exit 1; fi; \
	  echo "npm is not on PATH: the spec's linters skip (fail with CI set)"; exit 0; fi; \
	$(MAKE) --no-print-directory lint-deps && \
	cd $(SPEC_LINT) && REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npm run --silent lint

lint-deps: $(SPEC_LINT)/node_modules/.package-lock.json ## Install the spec linters' npm packages (npm ci in openapi/lint).
$(SPEC_LINT)/node_modules/.package-lock.json: $(SPEC_LINT)/package.json $(SPEC_LINT)/package-lock.json
	cd $(SPEC_LINT) && SCARF_ANALYTICS=false npm ci --no-audit --no-fund
	@touch $@

lint: ## gofmt and go vet.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
