package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/segmentio/kafka-go/sasl"
)

// oauthBearer is the OAUTHBEARER mechanism (KIP-255, RFC 7628): the
// initial client response carries the bearer token, from kafka.sasl's
// token-file (re-read at each connection) or its token-url (the OAuth 2.0
// client credentials grant, cached until a minute before expiry).
type oauthBearer struct {
	s      SASL
	client *http.Client

	mu      sync.Mutex
	token   string
	expires time.Time
}

func newOAuthBearer(s SASL) *oauthBearer {
	return &oauthBearer{s: s, client: &http.Client{Timeout: 15 * time.Second}}
}

func (m *oauthBearer) Name() string { return MechanismOAuthBearer }

func (m *oauthBearer) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	tok, err := m.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	return oauthSession{}, initialResponse(tok, m.s.Extensions), nil
}

// initialResponse is RFC 7628 §3.1's client response: gs2 header, the
// auth key and KIP-342 extensions, separated by ^A.
func initialResponse(token string, ext map[string]string) []byte {
	var b strings.Builder
	b.WriteString("n,,\x01auth=Bearer ")
	b.WriteString(token)
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("\x01" + k + "=" + ext[k])
	}
	b.WriteString("\x01\x01")
	return []byte(b.String())
}

type oauthSession struct{}

// Next: an empty answer is success; a non-empty one is the server's
// error (RFC 7628 §3.2.2), which the client acknowledges with ^A so that
// the broker then fails the authentication.
func (oauthSession) Next(_ context.Context, challenge []byte) (bool, []byte, error) {
	if len(challenge) == 0 {
		return true, nil, nil
	}
	return false, []byte{1}, nil
}

func (m *oauthBearer) get(ctx context.Context) (string, error) {
	if m.s.TokenFile != "" {
		tok, _, err := secure.ReadSecret(m.s.TokenFile, "kafka.sasl.token-file")
		return tok, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.token != "" && time.Now().Before(m.expires) {
		return m.token, nil
	}
	tok, ttl, err := m.fetch(ctx)
	if err != nil {
		return "", err
	}
	m.token, m.expires = tok, time.Now().Add(ttl-time.Minute)
	return tok, nil
}

// fetch does the client credentials grant (RFC 6749 §4.4) with the
// client authenticating by HTTP Basic (§2.3.1).
func (m *oauthBearer) fetch(ctx context.Context) (string, time.Duration, error) {
	secret := m.s.ClientSecret
	if m.s.ClientSecretFile != "" {
		var err error
		if secret, _, err = secure.ReadSecret(m.s.ClientSecretFile, "kafka.sasl.client-secret-file"); err != nil {
			return "", 0, err
		}
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if m.s.Scope != "" {
		form.Set("scope", m.s.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.s.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("kafka.sasl.token-url: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(m.s.ClientID), url.QueryEscape(secret))
	resp, err := m.client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("kafka.sasl.token-url: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var tr struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &tr)
	if tokenUnavailable(resp.StatusCode) {
		// The endpoint's own trouble: the dial fails and is retried.
		return "", 0, fmt.Errorf("kafka.sasl.token-url: the token endpoint answered HTTP %d (error %q): retried", resp.StatusCode, tr.Error)
	}
	if resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		// The body is not quoted: it may echo what was sent.
		return "", 0, &SecurityError{Broker: m.s.TokenURL, Setting: "kafka.sasl.client-id / client-secret",
			Fix: fmt.Sprintf("the token endpoint refused the client credentials grant (HTTP %d, error %q %s): check the client id, secret and scope", resp.StatusCode, tr.Error, tr.Description),
			Err: ErrSecurity}
	}
	ttl := time.Duration(tr.ExpiresIn) * time.Second
	if ttl < 2*time.Minute {
		ttl = 2 * time.Minute
	}
	return tr.AccessToken, ttl, nil
}

// tokenUnavailable reports whether a token endpoint's HTTP status is its
// own passing trouble (429 Too Many Requests, 5xx), retried; any other
// answer without a token refuses the grant or names a wrong endpoint
// (RFC 6749 §5.2: 400 and 401 for the client's credentials or scope; 403,
// 404), which no retry fixes.
func tokenUnavailable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}
