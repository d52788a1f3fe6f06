# cdc-outbox — see README.md.
SHELL := /bin/bash
GO       ?= go
STACK    := scripts/dev-stack.sh
# Semantic version from the newest v* tag (v1.2.3 → 1.2.3; 1.2.3-4-gabcdef012345 four commits later;
# -dirty with local changes); without a tag 0.0.0-dev+<commit>[.dirty]. Commit and date (the commit's time,
# UTC, so that a rebuild is identical) go to main.commit and main.date for --version.
GIT_DESC := $(shell git describe --tags --match 'v[0-9]*' --abbrev=12 --dirty 2>/dev/null)
GIT_HASH := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
VERSION  ?= $(if $(GIT_DESC),$(patsubst v%,%,$(GIT_DESC)),0.0.0-dev$(if $(GIT_HASH),+$(GIT_HASH)$(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),.dirty)))
COMMIT   ?= $(or $(shell git rev-parse HEAD 2>/dev/null),unknown)
DATE     ?= $(or $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null),unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
PLATFORMS := linux/amd64 linux/arm64
DIST     ?= dist

.PHONY: all build demo test unit integration vet faults bench stack-up stack-down stack-status clean test-cluster \
	deploy-check release release-check docker version

all: build

## build: static binary in bin/cdc-outbox
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/cdc-outbox ./cmd/cdc-outbox

## demo: the main job end to end on the real local stack (kill -9 and resume included)
demo:
	scripts/demo.sh

## test: unit tests, the deploy and release checks, then integration tests against the real local stack
## (started if needed; some unit tests run a private redis-server from the stack's packages)
test: vet deploy-check release-check
	$(STACK) up
	$(MAKE) unit
	eval "$$($(STACK) env)" && unset CDC_KAFKA_CLUSTER_BROKERS && $(GO) test -tags integration -count=1 -timeout 30m -v ./test/integration/
	$(MAKE) test-cluster CLUSTER_RUN='$(CLUSTER_CI)'

## test-cluster: the broker fault tests on a real 3-node KRaft cluster (scripts/dev-stack.sh up-cluster:
## RF 3, min.insync.replicas 2, 3 × 512 MB heap); CLUSTER_RUN selects them (all by default, about 4.5 min).
## make test runs the subset CLUSTER_CI (about 2 min with the cluster start).
CLUSTER_RUN ?= TestCluster
CLUSTER_CI  ?= TestClusterKillLeader|TestClusterPauseLeader|TestClusterStartWhilePaused
test-cluster:
	$(STACK) up
	$(STACK) up-cluster
	eval "$$($(STACK) env)" && $(GO) test -tags integration -count=1 -timeout 30m -v -run '$(CLUSTER_RUN)' ./test/integration/

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
	$(STACK) down-cluster
stack-status:
	$(STACK) status

clean:
	rm -rf bin $(DIST)

version:
	@echo $(VERSION)

## deploy-check: the dashboard and alert rules against the registered metrics, promtool check/test rules
## (skipped without promtool: apt-get install prometheus), the Kubernetes manifests (offline, typed)
deploy-check:
	$(GO) test -count=1 ./deploy/ ./health/
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...

## release: static binaries for $(PLATFORMS) in $(DIST)/, with SHA256SUMS
release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	set -e; for p in $(PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o $(DIST)/cdc-outbox_$(VERSION)_$${os}_$${arch} ./cmd/cdc-outbox; \
	done
	cd $(DIST) && sha256sum cdc-outbox_* > SHA256SUMS && cat SHA256SUMS

## release-check: make release into a scratch directory; checksums, static (CGO_ENABLED=0), platforms, --version
release-check:
	set -e; d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	$(MAKE) --no-print-directory release DIST=$$d >/dev/null; \
	(cd $$d && sha256sum -c --quiet SHA256SUMS); \
	for p in $(PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; f=$$d/cdc-outbox_$(VERSION)_$${os}_$${arch}; \
		info=$$($(GO) version -m $$f); \
		for want in "CGO_ENABLED=0" "GOOS=$$os" "GOARCH=$$arch"; do \
			grep -qF -- "$$want" <<<"$$info" || { echo "$$f: build info lacks $$want"; exit 1; }; \
		done; \
	done; \
	out=$$($$d/cdc-outbox_$(VERSION)_linux_$$($(GO) env GOARCH) --version); \
	grep -qF -- "$(VERSION)" <<<"$$out" || { echo "--version printed '$$out', want $(VERSION)"; exit 1; }; \
	echo "release-check: OK ($(VERSION), $(PLATFORMS))"

## docker: the image, version stamped
docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg DATE=$(DATE) -t cdc-outbox:$(VERSION) .

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
