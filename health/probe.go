package health

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Probe GETs url (e.g. http://127.0.0.1:9108/healthz) and returns nil on
// a 2xx answer; otherwise an error with the status and the start of the
// body (which names the stale loop or the reason). For images without a
// shell or curl (distroless): see cmd/cdc-outbox-probe.
func Probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health: probe %s: %w", url, err)
	}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health: probe: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 2048))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("health: probe %s: %s: %s", url, res.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
