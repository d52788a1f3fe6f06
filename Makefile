# cdc-outbox — see README.md.
SHELL := /bin/bash
GO       ?= go
STACK    := scripts/dev-stack.sh
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)

.PHONY: all build demo test unit integration vet faults bench stack-up stack-down stack-status clean

all: build

## build: static binary in bin/cdc-outbox
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/cdc-outbox ./cmd/cdc-outbox

## demo: the main job end to end on the real local stack (kill -9 and resume included)
demo:
	scripts/demo.sh

## test: unit tests, then integration tests against the real local stack (started if needed;
## some unit tests run a private redis-server from the stack's packages)
test: vet
	$(STACK) up
	$(MAKE) unit
	eval "$$($(STACK) env)" && $(GO) test -tags integration -count=1 -timeout 30m -v ./test/integration/

unit:
	$(GO) test -count=1 -race ./...
	# a short fuzz run of the binlog file reader, seeded with the recorded binlogs
	$(GO) test -run '^$$' -fuzz FuzzFileReader -fuzztime 20s ./binlog/
	# and of the MySQL binary JSON renderer against go-mysql's decoder
	$(GO) test -run '^$$' -fuzz FuzzMySQLJSON -fuzztime 10s ./binlog/

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./test/integration/
	# the house rules go vet does not know (no bare go statements, ...)
	$(GO) test -count=1 ./internal/lint/
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
