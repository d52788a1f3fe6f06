# cdc-outbox — see README.md.
SHELL := /bin/bash
GO       ?= go
STACK    := scripts/dev-stack.sh
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)

.PHONY: all build demo test unit integration vet faults bench stack-up stack-down stack-status clean test-flavours test-flavour-subset

all: build

## build: static binary in bin/cdc-outbox
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/cdc-outbox ./cmd/cdc-outbox

## demo: the main job end to end on the real local stack (kill -9 and resume included)
demo:
	scripts/demo.sh

## test: unit tests, then the integration tests against the real local stack (started if needed):
## all of them on MariaDB 10.11, then the server-dependent subset (FLAVOUR_TESTS) on MySQL 9.7
## and MariaDB 11.8, one after the other, on the same Redis and Kafka
test: vet unit
	$(STACK) up
	eval "$$($(STACK) env)" && $(GO) test -tags integration -count=1 -timeout 30m -v ./test/integration/
	$(MAKE) --no-print-directory test-flavour-subset

# The tests whose behaviour depends on the server: publish and order, rollback, kill -9 and
# resume (file and GTID mode), restart from a checkpoint, bad start positions, replay by
# position and time, rotation and purged binlogs, archived binlog files, DDL, a large
# transaction, database restart and killed connection, check/checkpoint commands, settings,
# unrelated traffic, MariaDB GTID domains, backfill and prune (MariaDB), the MySQL-only cases
# (compression, tagged GTIDs, PARTIAL_JSON, invisible columns/GIPK) and XA transactions.
FLAVOUR_TESTS ?= ^(TestExactlyOnceInOrderNoFaults|TestRolledBackTransactionPublishesNothing|TestKillMidStreamResumes|TestRestartResumesFromCheckpoint|TestRunBadStart|TestReplayRange|TestReplayByTime|TestRotationFlushBinaryLogs|TestPurgedCheckpoint|TestArchiveReplayAndCatchUp|TestSchemaChangesLiveAndReplay|TestLargeTransactionBoundedMemory|TestFaultDatabase|TestCheckCommand|TestCheckPurgedCheckpoint|TestCheckpointCommands|TestRuntimeSettingChangeStopsPublisher|TestUnrelatedTrafficPassesBy|TestGTID.*|TestBackfill|TestPrune|TestMySQL.*|TestXATransactions)$$
# the flavours beside the default MariaDB 10.11 (scripts/dev-stack.sh CDC_FLAVOR)
EXTRA_FLAVOURS ?= mysql mariadb11

# flavour_run FLAVOUR, RUN-REGEX: start that flavour's server on the stack, run the integration
# tests matching the regex (all if empty) against it, stop the server; the status is kept so
# that every flavour runs, and the loop fails at the end if one did.
define flavour_run
	CDC_FLAVOR=$(1) $(STACK) up
	t0=$$SECONDS; eval "$$(CDC_FLAVOR=$(1) $(STACK) env)" && \
		$(GO) test -tags integration -count=1 -timeout 30m -v $(if $(2),-run '$(2)') ./test/integration/; \
		rc=$$?; echo "flavour $(1): integration tests exit $$rc in $$((SECONDS - t0)) s"; \
		CDC_FLAVOR=$(1) $(STACK) stop-db; exit $$rc
endef

## test-flavour-subset: the server-dependent subset (FLAVOUR_TESTS) on each of EXTRA_FLAVOURS
test-flavour-subset:
	@rc=0; for f in $(EXTRA_FLAVOURS); do $(MAKE) --no-print-directory flavour-run-$$f RUN='$(FLAVOUR_TESTS)' || rc=1; done; exit $$rc

## test-flavours: the full integration suite on each of EXTRA_FLAVOURS (MySQL 9.7, MariaDB 11.8)
test-flavours:
	@rc=0; for f in $(EXTRA_FLAVOURS); do $(MAKE) --no-print-directory flavour-run-$$f RUN= || rc=1; done; exit $$rc

flavour-run-%:
	$(call flavour_run,$*,$(RUN))

unit:
	$(GO) test -count=1 -race ./...
	# a short fuzz run of the binlog file reader, seeded with the recorded binlogs
	$(GO) test -run '^$$' -fuzz FuzzFileReader -fuzztime 20s ./binlog/

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./test/integration/
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

stack-up:
	$(STACK) up
stack-down:
	$(STACK) down
stack-status:
	$(STACK) status

clean:
	rm -rf bin

## faults: the full-size fault matrix (20+ SIGKILL trials, 5,000-row transactions, broker 10–60 s down, ...);
## prints the table and writes it to fault-matrix.md. Stops and starts the local stack's services.
faults:
	$(STACK) up
	eval "$$($(STACK) env)" && CDC_FAULTS=full CDC_FAULT_REPORT=$(CURDIR)/fault-matrix.md \
		$(GO) test -tags integration -count=1 -timeout 120m -v -run 'TestFault' ./test/integration/

## bench: throughput, latency, recovery and the polling dispatcher baseline on the local stack;
## prints a table and appends it to BENCHMARKS.md (ROWS=1000000 by default)
ROWS ?= 1000000
bench: build
	$(STACK) up
	eval "$$($(STACK) env)" && $(GO) run ./bench -rows $(ROWS) -bin bin/cdc-outbox -out BENCHMARKS.md
