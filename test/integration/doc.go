// Package integration holds end-to-end tests of cdc-outbox against a real
// MariaDB, Kafka and Redis (scripts/dev-stack.sh up). They build the
// cdc-outbox binary and run it as a separate process, so that it can be
// killed with SIGKILL. Run them with `make test` (build tag integration).
package integration
