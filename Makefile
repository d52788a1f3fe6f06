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

.PHONY: all build docs demo demo-gateway test test-secure test-gateway unit integration vet faults bench stack-up stack-down stack-status clean \
	deploy-check release release-check helm-check helm-cli-check release-tool-check image-run-check docker version date test-otel test-flavours test-flavour-subset test-flavours-ci test-cluster test-many

all: build

## build: static binary in bin/cdc-outbox
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/cdc-outbox ./cmd/cdc-outbox

## docs: regenerate docs/configuration.md from the configuration structs (their doc and rule tags);
## go test ./config/ fails while the committed page differs from it
docs:
	$(GO) run ./cmd/cdc-outbox config reference -o docs/configuration.md

## demo: the main job end to end on the real local stack (kill -9 and resume included)
demo:
	scripts/demo.sh

## demo-gateway: two users chat through examples/gateway in the browser while cdc-outbox is killed and
## restarted and the gateway restarts (open the printed URLs; ARGS=--headless for screenshots)
demo-gateway:
	scripts/demo-gateway.sh $(ARGS)

## test: unit tests, the deploy and release checks, then the integration tests against the real local
## stack (started if needed; some unit tests run a private redis-server from the stack's packages):
## all of them on MariaDB 10.11, then (test-flavours-ci) all of them on MySQL 9.7 and the
## server-dependent subset (FLAVOUR_TESTS) on MariaDB 11.8, one after the other, on the same Redis and Kafka
test: vet deploy-check release-check
	$(call phase,stack up)
	$(STACK) up
	$(call phase,unit)
	$(MAKE) unit
	$(call phase,integration on MariaDB 10.11)
	eval "$$($(STACK) env)" && unset CDC_KAFKA_CLUSTER_BROKERS && $(GO) test -tags integration -count=1 $(IT_PARALLEL) -timeout 30m -v ./test/integration/
	# the producer against the real broker (idempotence: a resent batch stored once)
	eval "$$($(STACK) env)" && $(GO) test -tags integration -count=1 -v -run Broker ./sink/
	# the OTLP export against a real OpenTelemetry Collector
	$(call phase,otel and image)
	$(MAKE) --no-print-directory test-otel
	# the release image run with podman against the stack
	$(MAKE) --no-print-directory image-run-check
	$(call phase,cluster)
	$(MAKE) --no-print-directory test-cluster CLUSTER_RUN='$(CLUSTER_CI)'
	$(call phase,flavours)
	$(MAKE) --no-print-directory test-flavours-ci
	$(call phase,secure)
	$(MAKE) --no-print-directory test-secure
	$(call phase,gateway)
	$(MAKE) --no-print-directory test-gateway
	$(call phase,done)

# The integration tests that call t.Parallel (the operator fault matrix's cases, the one-shot
# commands against frozen servers) each have a world of their own and mostly wait on real time
# (read timeouts, leases, the alert recording): four side by side on 2 cores, not GOMAXPROCS (2).
IT_PARALLEL ?= -parallel 4

# phase prints a line that dates a phase of `make test` in the CI log (where the time goes).
phase = @echo "=== phase $(1) at $$(date -u +%H:%M:%S)"

# The tests whose behaviour depends on the server: publish and order, rollback, kill -9 and
# resume (file and GTID mode), restart from a checkpoint, bad start positions, replay by
# position and time, rotation and purged binlogs, archived binlog files, DDL, a large
# transaction and its fragments' positions (MariaDB 11.4+ omits end_log_pos inside
# transactions), database restart and killed connection, check/checkpoint commands (file
# and GTID mode), settings, unrelated traffic, MariaDB GTID domains, backfill (file and
# GTID mode) and prune, the MySQL-only cases
# (compression, tagged GTIDs, PARTIAL_JSON, invisible columns/GIPK) and XA transactions;
# each under 2 s: a damaged event in the server's own binlog file (checksums, MariaDB 11.4+
# positions), a 16 MB payload (MySQL's large binary JSON), poison rows (NULL payload,
# BIGINT UNSIGNED, oversize: their positions and GTIDs), a time-based replay past a NULL
# row, an old checkpoint's GTID set completed (MariaDB), recovery from the topic's
# headers, check without the privilege to list replicas (MariaDB), a checkpoint of another
# binlog history after a binlog reset (file and GTID mode; these reset the server's binlog),
# a server_id range holding the source's own.
FLAVOUR_TESTS ?= ^(TestLiveStreamChecksumMismatch|TestSixteenMegabytePayload|TestPoisonFailOversize|TestPoisonRowsDoNotBlock|TestPoisonNullPayloadFail|TestReplayByTimePastNullRow|TestCompleteGTIDSetOldCheckpoint|TestRecoverCheckpoint|TestCheckWarnsWithoutReplicaListing|TestExactlyOnceInOrderNoFaults|TestRolledBackTransactionPublishesNothing|TestKillMidStreamResumes|TestRestartResumesFromCheckpoint|TestRunBadStart|TestReplayRange|TestReplayByTime|TestRotationFlushBinaryLogs|TestPurgedCheckpoint|TestArchiveReplayAndCatchUp|TestSchemaChangesLiveAndReplay|TestLargeTransactionBoundedMemory|TestFragmentedTransactionPositions|TestFaultDatabase|TestCheckCommand|TestCheckPurgedCheckpoint|TestCheckpointCommands.*|TestRuntimeSettingChangeStopsPublisher|TestUnrelatedTrafficPassesBy|TestGTID.*|TestBackfill.*|TestPrune.*|TestMySQL.*|TestXATransactions|TestPayloadByteExact|TestMappingDebeziumOps|TestMappingGenericBackfillPrune|TestMappingRecoverFromHeaders|TestHAServerIDRangeHoldsSourcesOwn|TestHistory.*|TestCheckMapping|TestPoisonLargeTransaction.*)$$
# the flavours beside the default MariaDB 10.11 (scripts/dev-stack.sh CDC_FLAVOR)
EXTRA_FLAVOURS ?= mysql mariadb11
# make test (test-flavours-ci): the whole suite on FULL_FLAVOURS, FLAVOUR_TESTS on SUBSET_FLAVOURS
FULL_FLAVOURS   ?= mysql
SUBSET_FLAVOURS ?= mariadb11

# flavour_run FLAVOUR, RUN-REGEX: start that flavour's server on the stack, run the integration
# tests matching the regex (all if empty) against it, stop the server; the status is kept so
# that every flavour runs, and the loop fails at the end if one did.
define flavour_run
	CDC_FLAVOR=$(1) $(STACK) up
	t0=$$SECONDS; eval "$$(CDC_FLAVOR=$(1) $(STACK) env)" && unset CDC_KAFKA_CLUSTER_BROKERS && \
		$(GO) test -tags integration -count=1 $(IT_PARALLEL) -timeout 30m -v $(if $(2),-run '$(2)') ./test/integration/ && \
		$(GO) test -tags integration -count=1 -v -run 'TestMySQLJSONCorpusLive' ./binlog/; \
		rc=$$?; echo "flavour $(1): integration tests exit $$rc in $$((SECONDS - t0)) s"; \
		CDC_FLAVOR=$(1) $(STACK) stop-db; exit $$rc
endef

## test-secure: the secured servers (scripts/dev-stack.sh up-secure: TLS MariaDB with
## require_secure_transport, TLS Redis with an ACL user, Kafka with SASL_SSL/mTLS/expired-certificate
## listeners; certificates and passwords generated) and Redis Sentinel and Cluster (up-redis-ha),
## the TestSecure* tests against them (every connection kind, each bad input, publishing end to
## end) and the TestRedisHA* tests (hash slots, publish and restart on Cluster, a Sentinel
## failover), then the servers stopped
test-secure:
	$(STACK) up-secure
	$(STACK) up-redis-ha
	t0=$$SECONDS; eval "$$($(STACK) env)" && CDC_REQUIRE_SECURE=1 \
		$(GO) test -tags integration -count=1 -timeout 10m -v -run '^(TestSecure|TestRedisHA)' ./test/integration/; \
		rc=$$?; echo "secure: integration tests exit $$rc in $$((SECONDS - t0)) s"; $(STACK) down-redis-ha; $(STACK) down-secure; exit $$rc

## test-otel: the OTLP export of the metrics (metrics.otlp) against a real OpenTelemetry Collector
## (scripts/dev-stack.sh up-otel: built once from test/otelcol with the Go module proxy and cached, the OTLP
## receiver on loopback, the file exporter): TestOTLP* over gRPC and HTTP, then the collector stopped
test-otel:
	$(STACK) up
	$(STACK) up-otel
	t0=$$SECONDS; eval "$$($(STACK) env)" && unset CDC_KAFKA_CLUSTER_BROKERS && CDC_REQUIRE_OTEL=1 \
		$(GO) test -tags integration -count=1 -timeout 10m -v -run '^TestOTLP' ./test/integration/; \
		rc=$$?; echo "otel: integration tests exit $$rc in $$((SECONDS - t0)) s"; $(STACK) down-otel; exit $$rc

## test-flavour-subset: the server-dependent subset (FLAVOUR_TESTS) on each of EXTRA_FLAVOURS
test-flavour-subset:
	@rc=0; for f in $(EXTRA_FLAVOURS); do $(MAKE) --no-print-directory flavour-run-$$f RUN='$(FLAVOUR_TESTS)' || rc=1; done; exit $$rc

## test-flavours: the full integration suite on each of EXTRA_FLAVOURS (MySQL 9.7, MariaDB 11.8)
test-flavours:
	@rc=0; for f in $(EXTRA_FLAVOURS); do $(MAKE) --no-print-directory flavour-run-$$f RUN= || rc=1; done; exit $$rc

## test-flavours-ci (make test): the full integration suite on each of FULL_FLAVOURS (MySQL 9.7),
## then the server-dependent subset (FLAVOUR_TESTS) on each of SUBSET_FLAVOURS (MariaDB 11.8)
test-flavours-ci:
	@rc=0; for f in $(FULL_FLAVOURS); do $(MAKE) --no-print-directory flavour-run-$$f RUN= || rc=1; done; \
		for f in $(SUBSET_FLAVOURS); do $(MAKE) --no-print-directory flavour-run-$$f RUN='$(FLAVOUR_TESTS)' || rc=1; done; exit $$rc

flavour-run-%:
	$(call flavour_run,$*,$(RUN))

## test-gateway: examples/gateway in Debian's headless chromium (installed here when missing, as root):
## two tabs chat across a publisher SIGKILL and a gateway restart; every message once, in order
test-gateway:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
		{ echo "test-gateway needs chromium: apt-get install chromium"; exit 1; }
	$(STACK) up
	eval "$$($(STACK) env)" && $(GO) test -tags 'integration browser' -count=1 -timeout 10m -v -run 'TestGateway' ./test/integration/

## test-cluster: the broker fault tests on a real 3-node KRaft cluster (scripts/dev-stack.sh up-cluster:
## RF 3, min.insync.replicas 2, 3 × 512 MB heap); CLUSTER_RUN selects them (all by default, about 4.5 min).
## make test runs CLUSTER_CI: all of them since the metadata broker's, two down and the bootstrap broker's
## pass reliably (2026-12-06; they add about 2.5 min to the 2.5 min of the others with the cluster start).
CLUSTER_RUN ?= TestCluster
CLUSTER_CI  ?= TestClusterKillLeader|TestClusterPauseLeader|TestClusterMetadataBroker|TestClusterTwoDown|TestClusterBootstrapDies|TestClusterStartWhilePaused|TestClusterStartWhilePausedExactlyOnce
test-cluster:
	$(STACK) up
	$(STACK) up-cluster
	t0=$$SECONDS; eval "$$($(STACK) env)" && $(GO) test -tags integration -count=1 -timeout 30m -v -run '$(CLUSTER_RUN)' ./test/integration/; \
		rc=$$?; echo "cluster: integration tests exit $$rc in $$((SECONDS - t0)) s"; $(STACK) down-cluster; exit $$rc

## test-many: many sources (docs/ha.md, "Many sources"): TestHAManySources with MANY_SOURCES outbox tables
## (64 by default), each its own entry of sources:, over MANY_INSTANCES instances (3) on a private
## redis-server: the spread, per-source state, a kill -9 under a light load, and the cost per idle
## source. Heavy (64 binlog streams, about 2 min): not in make test, which runs the same test with 8
## sources over 2 instances.
MANY_SOURCES   ?= 64
MANY_INSTANCES ?= 3
test-many:
	$(STACK) up
	eval "$$($(STACK) env)" && CDC_MANY_SOURCES=$(MANY_SOURCES) CDC_MANY_INSTANCES=$(MANY_INSTANCES) \
		$(GO) test -tags integration -count=1 -timeout 20m -v -run '^TestHAManySources$$' ./test/integration/

unit:
	$(GO) test -count=1 -race ./...
	# internal/rawconn wraps nothing under -race (see its doc): its own tests without it
	$(GO) test -count=1 ./internal/rawconn/
	# a short fuzz run of the binlog file reader, seeded with the recorded binlogs. The budgets are
	# counts of executions, not durations: Go 1.26's fuzz coordinator can report a bare "context
	# deadline exceeded" at the end of a -fuzztime duration on a loaded machine (golang/go#75804,
	# fixed in Go 1.27), which failed CI with no crasher. About 10-25 s each on an idle core pair.
	$(GO) test -run '^$$' -fuzz '^FuzzFileReader$$' -fuzztime 150000x ./binlog/
	# and of the MySQL binary JSON renderer against go-mysql's decoder
	$(GO) test -run '^$$' -fuzz '^FuzzMySQLJSON$$' -fuzztime 50000x ./binlog/
	# and of the Produce response reader (sink/wire.go)
	$(GO) test -run '^$$' -fuzz '^FuzzReadProduceResponse$$' -fuzztime 300000x ./sink/

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./test/integration/
	$(GO) vet -tags 'integration browser' ./test/integration/
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
# the commit's time (the release's timestamps; RELEASING.md)
date:
	@echo $(DATE)

## deploy-check: the dashboard and alert rules against the registered metrics, promtool check/test rules
## (skipped without promtool: apt-get install prometheus), the Kubernetes manifests (offline, typed)
deploy-check:
	$(GO) test -count=1 ./deploy/ ./health/
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...

## release: everything a release publishes, in $(DIST)/, stamped with VERSION (from the newest v* tag,
## or given: make release VERSION=0.1.0 builds it from any commit): static binaries cdc-outbox and
## cdc-outbox-probe for $(PLATFORMS); the multi-platform OCI image built without a Docker daemon
## (scripts/release: the layout cdc-outbox_V_oci/ and its archive cdc-outbox_V_oci.tar); a CycloneDX
## SBOM per binary (cyclonedx-gomod, from the module graph recorded in the binary) and one of the image
## (cdc-outbox_V_oci.cdx.json: its digest, each binary's hash and modules, the CA bundle); SHA256SUMS; with
## SIGNING_KEY (an SSH private key), SHA256SUMS.sig (ssh-keygen -Y sign, namespace "file").
## A plain MAJOR.MINOR.PATCH needs its "## [MAJOR.MINOR.PATCH]" section in CHANGELOG.md. RELEASING.md.
SIGNING_KEY ?=
SOURCE_URL  ?= https://github.com/cdc-outbox/cdc-outbox
# where the image is published (the image SBOM's purl; the Helm chart's and the manifests' image)
IMAGE_REPO  ?= ghcr.io/cdc-outbox/cdc-outbox
RELEASE_TOOL = $(GO) -C scripts/release
release:
	@[[ "$(VERSION)" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$$ ]] || \
		{ echo "release: VERSION=$(VERSION): want MAJOR.MINOR.PATCH[-prerelease][+build] (make release VERSION=0.1.0)"; exit 2; }
	@[[ "$(VERSION)" == *[-+]* ]] || grep -qF '## [$(VERSION)]' CHANGELOG.md || \
		{ echo "release: CHANGELOG.md has no '## [$(VERSION)]' section (RELEASING.md, step 1)"; exit 2; }
	@[[ "$(VERSION)" == *[-+]* ]] || grep -qx 'appVersion: "$(VERSION)"' deploy/helm/cdc-outbox/Chart.yaml || \
		{ echo "release: deploy/helm/cdc-outbox/Chart.yaml's appVersion is not $(VERSION) (RELEASING.md, step 2)"; exit 2; }
	rm -rf $(DIST) && mkdir -p $(DIST)
	set -e; for p in $(PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o $(DIST)/cdc-outbox_$(VERSION)_$${os}_$${arch} ./cmd/cdc-outbox; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w' \
			-o $(DIST)/cdc-outbox-probe_$(VERSION)_$${os}_$${arch} ./cmd/cdc-outbox-probe; \
	done
	set -e; for f in $(DIST)/cdc-outbox_$(VERSION)_linux_* $(DIST)/cdc-outbox-probe_$(VERSION)_linux_*; do \
		$(RELEASE_TOOL) tool cyclonedx-gomod bin -json -noserial -notimestamp -std -version 'v$(VERSION)' \
			-output $(abspath $(DIST))/$${f##*/}.cdx.json $(abspath $(DIST))/$${f##*/} 2>/dev/null; \
	done
	$(RELEASE_TOOL) run . image -dist $(abspath $(DIST)) -version '$(VERSION)' -commit '$(COMMIT)' -date '$(DATE)' \
		-source '$(SOURCE_URL)' -platforms '$(PLATFORMS)' -repo '$(IMAGE_REPO)'
	cd $(DIST) && sha256sum $$(find . -maxdepth 1 -type f -name 'cdc-outbox*' -printf '%P\n' | LC_ALL=C sort) > SHA256SUMS && cat SHA256SUMS
	$(if $(SIGNING_KEY),ssh-keygen -q -Y sign -f '$(SIGNING_KEY)' -n file $(DIST)/SHA256SUMS && ls $(DIST)/SHA256SUMS.sig)

## release-check: make release twice into scratch directories, signed with a key generated for the
## check: the signature (and a tampered SHA256SUMS refused), the checksums, static binaries of each
## platform, --version, the OCI image (scripts/release check-image: platforms, user 65532, entrypoint,
## labels, files, the amd64 binary run from the layer, its SBOM against it), the binaries' SBOMs, the second build identical
## (reproducible: the same commit gives the same digests); then the Helm chart (deploy/helm: helm lint's
## rules and helm template with each values file of deploy/helm/testdata, in process, the objects typed)
release-check: helm-check release-tool-check
	@command -v ssh-keygen >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-client >/dev/null; } || \
		{ echo "release-check needs ssh-keygen: apt-get install openssh-client"; exit 1; }
	set -e; d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	ssh-keygen -q -t ed25519 -N '' -C release-check -f $$d/key; \
	$(MAKE) --no-print-directory release DIST=$$d/a SIGNING_KEY=$$d/key >/dev/null; \
	echo "release-check@cdc-outbox $$(cat $$d/key.pub)" > $$d/allowed_signers; \
	ssh-keygen -Y verify -f $$d/allowed_signers -I release-check@cdc-outbox -n file -s $$d/a/SHA256SUMS.sig < $$d/a/SHA256SUMS; \
	! { sed 's/^./0/' $$d/a/SHA256SUMS | ssh-keygen -Y verify -f $$d/allowed_signers -I release-check@cdc-outbox -n file \
		-s $$d/a/SHA256SUMS.sig >/dev/null 2>&1; } || { echo "a tampered SHA256SUMS passed the signature check"; exit 1; }; \
	(cd $$d/a && sha256sum -c --quiet SHA256SUMS); \
	for p in $(PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
		for b in cdc-outbox cdc-outbox-probe; do f=$$d/a/$${b}_$(VERSION)_$${os}_$${arch}; \
			info=$$($(GO) version -m $$f); \
			for want in "CGO_ENABLED=0" "GOOS=$$os" "GOARCH=$$arch"; do \
				grep -qF -- "$$want" <<<"$$info" || { echo "$$f: build info lacks $$want"; exit 1; }; \
			done; \
			grep -qF '"bomFormat": "CycloneDX"' $$f.cdx.json && grep -qF '"version": "v$(VERSION)"' $$f.cdx.json && \
				grep -qF 'pkg:golang/github.com/cdc-outbox/cdc-outbox@v$(VERSION)' $$f.cdx.json || \
				{ echo "$$f.cdx.json: not a CycloneDX SBOM of cdc-outbox v$(VERSION)"; exit 1; }; \
		done; \
	done; \
	out=$$($$d/a/cdc-outbox_$(VERSION)_linux_$$($(GO) env GOARCH) --version); \
	grep -qF -- "$(VERSION)" <<<"$$out" || { echo "--version printed '$$out', want $(VERSION)"; exit 1; }; \
	$(RELEASE_TOOL) run . check-image -dist $$d/a -version '$(VERSION)' -commit '$(COMMIT)' -date '$(DATE)' \
		-source '$(SOURCE_URL)' -platforms '$(PLATFORMS)' -repo '$(IMAGE_REPO)'; \
	$(MAKE) --no-print-directory release DIST=$$d/b >/dev/null; \
	diff $$d/a/SHA256SUMS $$d/b/SHA256SUMS || { echo "release-check: a second build differs (not reproducible)"; exit 1; }; \
	echo "release-check: OK ($(VERSION), $(PLATFORMS): binaries, image, SBOMs, SHA256SUMS and its signature, reproducible)"

## release-tool-check: scripts/release's own tests (the image reproducible, the check refusing a wrong
## version, a missing platform, binaries of another architecture)
release-tool-check:
	$(RELEASE_TOOL) vet ./... && $(RELEASE_TOOL) test -count=1 ./...

## image-run-check: the release image run for real with Debian's podman (installed here when missing, as
## root; runc, as crun refuses this machine's hybrid cgroups): loaded from the release's OCI archive,
## --version, then TestImageRun against the local stack (host network: uid 65532, /healthz, /readyz,
## the probe, rows published in order, SIGTERM exits 0)
PODMAN ?= podman --runtime runc
image-run-check:
	@command -v podman >/dev/null && command -v runc >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc uidmap >/dev/null; } || \
		{ echo "image-run-check needs podman and runc: apt-get install podman runc"; exit 1; }
	$(STACK) up
	set -e; d=$$(mktemp -d); \
	$(MAKE) --no-print-directory release DIST=$$d >/dev/null; \
	id=$$($(PODMAN) pull -q oci-archive:$$d/cdc-outbox_$(VERSION)_oci.tar); \
	trap '$(PODMAN) rmi -f $$id >/dev/null; rm -rf $$d' EXIT; \
	out=$$($(PODMAN) run --rm --network none --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 $$id --version); \
	grep -qF -- "$(VERSION)" <<<"$$out" || { echo "podman run --version printed '$$out', want $(VERSION)"; exit 1; }; \
	eval "$$($(STACK) env)" && CDC_IMAGE=$$id CDC_PODMAN='$(PODMAN)' \
		$(GO) test -tags integration -count=1 -v -run '^TestImageRun$$' ./test/integration/

## helm-check: the Helm chart deploy/helm/cdc-outbox, offline (deploy/helm/doc.go)
helm-check:
	cd deploy/helm && $(GO) vet ./... && $(GO) test -count=1 ./...

## helm-cli-check: the real helm CLI (built from the Go module proxy, HELM_VERSION; about 6 minutes the
## first time on 2 cores, hence not in make test, which runs helm's lint and template code in process):
## helm lint --strict and helm template with the defaults and each values file of deploy/helm/testdata
HELM_VERSION ?= v4.3.2
HELM = $(GO) run helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
helm-cli-check:
	set -e; cd deploy/helm; for f in "" testdata/*.yaml; do \
		$(HELM) lint --strict cdc-outbox $${f:+-f $$f} >/dev/null; \
		$(HELM) template cdc-outbox cdc-outbox -n outbox $${f:+-f $$f} >/dev/null; \
		echo "helm lint --strict, helm template: $${f:-defaults}: OK"; \
	done

## docker: the image, version stamped
docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg DATE=$(DATE) -t cdc-outbox:$(VERSION) .

## faults: the full-size fault matrix (20+ SIGKILL trials, 5,000-row transactions, broker 10–60 s down, ...);
## prints the table and writes it to fault-matrix.md. Stops and starts the local stack's services.
faults:
	$(STACK) up
	eval "$$($(STACK) env)" && CDC_FAULTS=full CDC_FAULT_REPORT=$(CURDIR)/fault-matrix.md \
		$(GO) test -tags integration -count=1 -timeout 120m -v -run 'TestFault' ./test/integration/

## debezium-golden: record what Debezium 3.6.1.Final (embedded engine, MySQL connector, Outbox Event
## Router, Kafka Connect's StringConverter and JsonConverter) makes of testdata/debezium/corpus.sql on the
## local stack's MySQL 9.7 (test/debezium, needs Java 17 and Maven; a minute): rewrites
## testdata/debezium/mysql.*.jsonl and the offsets Debezium stored (mysql.offsets.dat), then lets
## cdc-outbox take over from that offset (TestMySQLDebeziumRealTakeover); not in CI,
## TestMySQLDebeziumGolden compares the debezium preset against the checked-in files
.PHONY: debezium-golden
debezium-golden:
	CDC_FLAVOR=mysql $(STACK) up
	eval "$$(CDC_FLAVOR=mysql $(STACK) env)" && cd test/debezium && mvn -B -q compile exec:java \
		-Dexec.args="mysql $${CDC_MYSQL_ADDR##*:} dbz_golden_outbox ../../testdata/debezium/corpus.sql ../../testdata/debezium $(CURDIR)/test/debezium/target/work"
	# cdc-outbox takes over from the offset Debezium just stored (rows written after it published once,
	# the transaction Debezium was in published again)
	eval "$$(CDC_FLAVOR=mysql $(STACK) env)" && unset CDC_KAFKA_CLUSTER_BROKERS && \
		CDC_DEBEZIUM_OFFSETS=$(CURDIR)/test/debezium/target/work/offsets.dat \
		$(GO) test -tags integration -count=1 -v -run '^TestMySQLDebeziumRealTakeover$$' ./test/integration/

## bench: throughput, latency, recovery and the polling dispatcher baseline on the local stack;
## prints a table and appends it to BENCHMARKS.md (ROWS=1000000 by default)
ROWS ?= 1000000
## then the raw limits and the drain again on MySQL 9.7 (CDC_FLAVOR=mysql, -drain-only), appended beside
## (BENCH_FLAVOURS= skips it); its server is stopped afterwards
BENCH_FLAVOURS ?= mysql
bench: build
	$(STACK) up
	eval "$$($(STACK) env)" && $(GO) run ./bench -rows $(ROWS) -bin bin/cdc-outbox -out BENCHMARKS.md
	@rc=0; for f in $(BENCH_FLAVOURS); do \
		CDC_FLAVOR=$$f $(STACK) up && eval "$$(CDC_FLAVOR=$$f $(STACK) env)" && \
			$(GO) run ./bench -rows $(ROWS) -drain-only -bin bin/cdc-outbox -out BENCHMARKS.md || rc=1; \
		CDC_FLAVOR=$$f $(STACK) stop-db; done; exit $$rc
