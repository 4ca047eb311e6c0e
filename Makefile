# Developer and CI entry points. `make` (or `make help`) lists the targets.
#
# Backing services (Redis, MySQL/MariaDB, Kafka) come from Docker Compose when a Docker engine
# answers, otherwise from scripts/services (local processes, data under .local/).
# SERVICES=local or SERVICES=docker forces one.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

SERVICES ?= auto
GOTESTFLAGS ?=
BENCHFLAGS ?=
FUZZTIME ?= 15s
# make test runs the API fuzzer with this seed, so a run is repeatable; make api-fuzz draws a new
# one each time (docs/testing.md "The API fuzzer").
API_FUZZ_CI_SEED ?= 852757313
# make soak: the seed of its fault schedule (the same seed replays the same schedule) and how long
# the schedule runs; make test runs the default, short one.
SEED ?= 1
DURATION ?= 2m
# make soak TOPOLOGY=replicated runs it on a private copy of the replicated topology (docs/soak.md).
TOPOLOGY ?= single
PKG ?= ./... ./bench/...
# staticcheck 2026.2.2; the proxy knows its releases by these module versions.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := go run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Prints "docker" or "local".
backend = $(if $(filter local docker,$(SERVICES)),$(SERVICES),$$(docker info >/dev/null 2>&1 && docker compose version >/dev/null 2>&1 && echo docker || echo local))

.PHONY: help up down status build test test-faults rules check run bench chaos chaos-run chaos-cluster chaos-cluster-run soak api-fuzz keycloak browser console

help: ## list the targets
	@echo "usage: make TARGET  (SERVICES=auto|local|docker, GOTESTFLAGS=..., BENCHFLAGS=...)"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

up: ## start Redis, MySQL and Kafka (Docker Compose if Docker answers, else scripts/services)
	@if [ "$(backend)" = docker ]; then \
		docker compose up -d --wait redis mysql kafka redis-cluster; \
	else \
		scripts/services up; \
	fi

down: ## stop the services that `make up` started (data is kept)
	@if [ "$(backend)" = docker ]; then docker compose down; fi
	@scripts/services down

status: ## show whether each service answers
	@if [ "$(backend)" = docker ]; then docker compose ps; fi
	@scripts/services status || true

build: ## build bin/api, bin/consumer, bin/reconciler
	go build -o bin/ $$(for p in api consumer reconciler; do [ -f $$p/main.go ] && echo ./$$p; done)

test: up rules ## unit and integration tests with -race against the real services, the fuzzers (under 10 min)
	go test -race -count=1 -timeout 30m $(GOTESTFLAGS) $(PKG)
	go test -run '^$$' -fuzz FuzzDecodePlaceOrder -fuzztime $(FUZZTIME) ./api/internal/httpapi/
	API_FUZZ_SEED=$${API_FUZZ_SEED:-$(API_FUZZ_CI_SEED)} scripts/api-fuzz

# The suites that stop services, start other topologies or run for minutes: .ci/run runs them
# after `make test`.
test-faults: up ## the fault suites: Keycloak, the browser, the console, chaos, the replicated failovers, a 2-minute soak, a 1-minute replicated soak
	@$(MAKE) --no-print-directory keycloak
	@$(MAKE) --no-print-directory browser
	@$(MAKE) --no-print-directory console
	@$(MAKE) --no-print-directory chaos-run
	@$(MAKE) --no-print-directory chaos-cluster
	@$(MAKE) --no-print-directory soak TOPOLOGY=single
	@$(MAKE) --no-print-directory soak TOPOLOGY=replicated DURATION=1m

rules: ## check and unit-test the alerting rules (deploy/prometheus) with promtool
	@scripts/services tool prometheus
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml

check: ## gofmt, go vet, staticcheck, docker compose config (if available), then the tests
	@files=$$(find . \( -path ./.local -o -path ./.git -o -path ./bin \) -prune -o -name '*.go' -print); \
	if [ -n "$$files" ]; then \
		unformatted=$$(gofmt -l $$files); \
		if [ -n "$$unformatted" ]; then echo "gofmt: these files need formatting:"; echo "$$unformatted"; exit 1; fi; \
	fi
	go vet $(PKG)
	$(STATICCHECK) $(PKG)
	@if docker compose version >/dev/null 2>&1; then \
		docker compose config -q && docker compose --profile observability config -q; \
	else echo "docker compose not available: docker-compose.yml not validated"; fi
	@$(MAKE) --no-print-directory test

api-fuzz: up ## Schemathesis, every check, against docs/openapi.yaml and a live api (scripts/api-fuzz)
	scripts/api-fuzz

# A real identity provider (scripts/services.d/keycloak.sh: Keycloak from Maven Central, a JVM
# on 127.0.0.1:18180), for the one test that signs a buyer in there; scripts/services on either
# backend.
keycloak: ## start Keycloak and run the end-to-end sign-in test against it
	scripts/services up keycloak
	go test -race -tags keycloak -count=1 -timeout 10m -run '^TestKeycloak' $(GOTESTFLAGS) ./e2e/

# The waiting page in Debian's Chromium, headless (installed by scripts/services tool chromium).
browser: ## open the waiting page in a headless browser: join, wait, buy; a second tab; sold out
	scripts/services tool chromium
	go test -race -tags browser -count=1 -timeout 10m -run '^TestWaitingPage' $(GOTESTFLAGS) ./e2e/

# The operator console in Chromium, the operator signed in at Keycloak (docs/console.md); its
# screenshots go to $(SECKILL_SCREENSHOTS), or to a folder the test names.
console: ## run a drop from the operator console in a headless browser, signed in at Keycloak
	scripts/services up keycloak
	scripts/services tool chromium
	go test -race -tags console -count=1 -timeout 10m -run '^TestConsole' $(GOTESTFLAGS) ./e2e/

run: ## run the whole pipeline locally (scripts/dev-run)
	scripts/dev-run

# The bench starts the native services it finds missing and stops them again at the end.
bench: ## run the load generator (BENCHFLAGS passes flags)
	@if [ "$(backend)" = docker ]; then $(MAKE) --no-print-directory up; fi
	go run ./bench $(BENCHFLAGS)

chaos: up ## run the fault and hostile-input suite alone (it stops and restarts services)
	@$(MAKE) --no-print-directory chaos-run

# The chaos tests stop shared services, so they run after everything else, one at a time.
chaos-run:
	SECKILL_SERVICES=$(backend) go test -race -tags chaos -count=1 -p 1 -timeout 30m -v -skip '^TestReplicated' $(GOTESTFLAGS) ./chaos/

# The replicated topology (docs/replicated.md): three Kafka brokers, a Redis Cluster
# with a replica per master, a MariaDB primary with a standby.
REPLICATED := kafka-cluster redis-replicas mysql-standby
# The same in docker-compose.yml's replicated profile (redis-replicas and mysql-standby start their nodes).
REPLICATED_DOCKER := kafka-1 kafka-2 kafka-3 redis-replicas mysql-standby

chaos-cluster: ## start the replicated topology and run its failover scenarios
	@if [ "$(backend)" = docker ]; then \
		docker compose --profile replicated up -d --wait $(REPLICATED_DOCKER); \
	else \
		scripts/services tool iptables && scripts/services up $(REPLICATED); \
	fi
	@$(MAKE) --no-print-directory chaos-cluster-run

chaos-cluster-run:
	SECKILL_SERVICES=$(backend) go test -race -tags chaos -count=1 -p 1 -timeout 30m -v -run '^TestReplicated' $(GOTESTFLAGS) ./chaos/

# The soak (chaos/soak_test.go) starts its own Redis, MariaDB and Kafka with scripts/services on
# ports from 16000 (SOAK_PORT_BASE) in a folder of its own, sharing .local/cache's Kafka jars, and
# stops them at the end: it never touches the services `make up` started. It prints its schedule,
# a report and one "soak: seed N, faults ..., promises n/n held" line, and fails with the seed when
# a promise breaks. The programs it runs are not race-built, so neither is the soak (less CPU for
# the faults and the client mix); every other test runs with -race.
soak: ## a seeded randomized fault schedule against the whole pipeline (SEED=1 DURATION=2m TOPOLOGY=single|replicated)
	@if [ "$(TOPOLOGY)" = replicated ]; then scripts/services tool iptables; fi
	SOAK_SEED=$(SEED) SOAK_DURATION=$(DURATION) SOAK_TOPOLOGY=$(TOPOLOGY) go test -tags soak -count=1 -timeout 3h -v -run '^TestSoak' $(GOTESTFLAGS) ./chaos/
