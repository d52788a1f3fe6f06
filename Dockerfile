# Static cdc-outbox binary on a distroless base (no shell: the HEALTHCHECK is
# the small cdc-outbox-probe binary, a GET of /healthz).
#   docker build --build-arg VERSION=$(make -s version) -t cdc-outbox .    (or: make docker)
FROM golang:1.26 AS build
# Stamped into --version and cdc_outbox_build_info (the Makefile passes them; .git is not in the context).
ARG VERSION=0.0.0-dev
ARG COMMIT=unknown
ARG DATE=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${DATE}" \
      -o /out/cdc-outbox ./cmd/cdc-outbox \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/cdc-outbox-probe ./cmd/cdc-outbox-probe

# The release image (make release, scripts/release) is built without Docker from
# scratch with the same binaries, user (65532), entrypoint, environment and labels.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=0.0.0-dev
ARG COMMIT=unknown
ARG DATE=unknown
LABEL org.opencontainers.image.title="cdc-outbox" \
      org.opencontainers.image.description="Publishes transactional-outbox rows from the MySQL/MariaDB binlog to Kafka" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${DATE}" \
      org.opencontainers.image.source="https://github.com/cdc-outbox/cdc-outbox" \
      org.opencontainers.image.url="https://github.com/cdc-outbox/cdc-outbox" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/cdc-outbox /out/cdc-outbox-probe /usr/local/bin/
# /healthz, /readyz, /status and /metrics. Inside the container every interface
# (publish it on the host's loopback: -p 127.0.0.1:9108:9108). The variable
# overrides metrics-addr of the config file; the probe reads its port from it.
ENV CDC_OUTBOX_METRICS_ADDR=:9108
EXPOSE 9108
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD ["/usr/local/bin/cdc-outbox-probe"]
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/cdc-outbox"]
CMD ["run", "--config", "/etc/cdc-outbox/config.yaml"]
