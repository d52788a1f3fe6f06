package sink

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestTokenUnavailable(t *testing.T) {
	for status, want := range map[int]bool{200: false, 400: false, 401: false, 403: false, 404: false, 429: true, 500: true, 502: true, 503: true} {
		if got := tokenUnavailable(status); got != want {
			t.Errorf("tokenUnavailable(%d) = %v, want %v", status, got, want)
		}
	}
}

// A token endpoint refusing the client's credentials is a *SecurityError
// (fatal: the publisher stops, naming the settings); one that is down or
// throttling is an error retried with the dial.
func TestOAuthTokenEndpointErrors(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		fatal  bool
	}{
		{http.StatusUnauthorized, `{"error":"invalid_client"}`, true},
		{http.StatusBadRequest, `{"error":"invalid_scope"}`, true},
		{http.StatusServiceUnavailable, `upstream down`, false},
		{http.StatusTooManyRequests, `{"error":"slow_down"}`, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(c.body))
		}))
		m := newOAuthBearer(SASL{Mechanism: MechanismOAuthBearer, TokenURL: srv.URL, ClientID: "id", ClientSecret: "secret"})
		_, _, err := m.Start(context.Background())
		srv.Close()
		if err == nil {
			t.Fatalf("HTTP %d: no error", c.status)
		}
		if got := errors.Is(err, ErrSecurity) && IsFatal(err); got != c.fatal {
			t.Errorf("HTTP %d: %v: fatal %v, want %v", c.status, err, got, c.fatal)
		}
	}
}
