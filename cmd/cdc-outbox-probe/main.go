// Command cdc-outbox-probe GETs a health endpoint of a running cdc-outbox
// and exits 0 on a 2xx answer, 1 otherwise (printing why): the image's
// HEALTHCHECK, which cannot use curl on a distroless base.
//
// Usage: cdc-outbox-probe [-url http://127.0.0.1:9108/healthz] [-timeout 3s]
//
// The URL defaults to $CDC_OUTBOX_PROBE_URL, else /healthz on the port of
// $CDC_OUTBOX_METRICS_ADDR (loopback), else http://127.0.0.1:9108/healthz.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/cdc-outbox/cdc-outbox/health"
)

func main() {
	url := flag.String("url", defaultURL(), "health endpoint to GET")
	timeout := flag.Duration("timeout", 3*time.Second, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := health.Probe(ctx, &http.Client{Timeout: *timeout}, *url); err != nil {
		fmt.Fprintln(os.Stderr, "cdc-outbox-probe:", err)
		os.Exit(1)
	}
}

func defaultURL() string {
	if u := os.Getenv("CDC_OUTBOX_PROBE_URL"); u != "" {
		return u
	}
	port := "9108"
	if _, p, err := net.SplitHostPort(os.Getenv("CDC_OUTBOX_METRICS_ADDR")); err == nil && p != "" {
		port = p
	}
	return "http://127.0.0.1:" + port + "/healthz"
}
