# Static cdc-outbox binary on a distroless base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/cdc-outbox ./cmd/cdc-outbox

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cdc-outbox /usr/local/bin/cdc-outbox
ENTRYPOINT ["/usr/local/bin/cdc-outbox"]
CMD ["run", "--config", "/etc/cdc-outbox/config.yaml"]
