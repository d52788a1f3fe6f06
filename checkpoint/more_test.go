package checkpoint

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"go.uber.org/zap"
)

// fakeMirror is an in-memory Mirror that can be made to fail.
type fakeMirror struct {
	mu      sync.Mutex
	vals    map[string][]byte
	fail    error
	delFail error
	n       int
}

func (m *fakeMirror) Save(_ context.Context, key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if m.vals == nil {
		m.vals = map[string][]byte{}
	}
	m.vals[key] = value
	m.n++
	return nil
}

func (m *fakeMirror) Load(_ context.Context, key string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[key]
	return v, ok, nil
}

func (m *fakeMirror) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.delFail != nil {
		return m.delFail
	}
	delete(m.vals, key)
	return nil
}

func (m *fakeMirror) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// Every explicit write is copied to the mirror at once, the periodic ones
// not (the Committer's copier copies them: copyLatest), and copyLatest
// brings the copy up to date once; a failed copy is counted and reported
// and the Redis write stands.
func TestWriterMirror(t *testing.T) {
	b, m := newFake(), &fakeMirror{}
	w := NewWriter(b, Source{ServerID: 1, Flavor: "mariadb"}, nil)
	var mirrorErrs []error
	w.SetMirror(m, time.Hour, func(err error) { mirrorErrs = append(mirrorErrs, err) })
	ctx := context.Background()
	if err := w.put(ctx, pos("f.000001", 10)); err != nil {
		t.Fatal(err)
	}
	if m.count() != 1 {
		t.Fatalf("explicit write copied %d times, want 1", m.count())
	}
	if err := w.periodic(ctx, pos("f.000001", 20)); err != nil || m.count() != 1 {
		t.Fatalf("periodic write copied: %v, %d copies", err, m.count())
	}
	if err := w.copyLatest(ctx); err != nil {
		t.Fatal(err)
	}
	v, ok, _ := m.Load(ctx, "k")
	cp, err := Parse("k", v)
	if !ok || err != nil || cp.Pos != 20 || m.count() != 2 {
		t.Fatalf("after copyLatest: %+v %v, %d copies", cp, err, m.count())
	}
	if err := w.copyLatest(ctx); err != nil || m.count() != 2 { // already up to date
		t.Fatalf("copyLatest of an up-to-date copy: %v, %d copies", err, m.count())
	}
	m.fail = errors.New("kafka down")
	if err := w.put(ctx, pos("f.000001", 30)); err != nil {
		t.Fatalf("a failed copy failed the write: %v", err)
	}
	if got, _ := b.last(); got.Pos != 30 || len(mirrorErrs) != 1 || !strings.Contains(mirrorErrs[0].Error(), "kafka down") || w.MirrorFailures() != 1 {
		t.Fatalf("Redis at %d, mirror errors %v, %d failures counted", got.Pos, mirrorErrs, w.MirrorFailures())
	}
	if err := NewWriter(b, Source{}, nil).copyLatest(ctx); err != nil { // no mirror, nothing stored: nothing to copy
		t.Fatal(err)
	}
}

type recObserver struct {
	saved  []binlog.Position
	failed int
}

func (o *recObserver) CheckpointSaved(p binlog.Position) { o.saved = append(o.saved, p) }
func (o *recObserver) CheckpointFailed()                 { o.failed++ }
func (o *recObserver) CheckpointMirrorFailed()           {}

// The Committer tells its observer each write's outcome.
func TestCommitterObserver(t *testing.T) {
	b := newFake()
	o := &recObserver{}
	c := NewCommitter(NewWriter(b, Source{}, nil), time.Hour, time.Second, binlog.Position{}, zap.NewNop())
	c.SetObserver(o)
	acks := make(chan Ack, 1)
	acks <- Ack{End: pos("f.000001", 10)}
	close(acks)
	if err := c.Run(context.Background(), acks); err != nil {
		t.Fatal(err)
	}
	b.fail = errors.New("redis down")
	c2 := NewCommitter(NewWriter(b, Source{}, nil), time.Hour, time.Second, binlog.Position{}, zap.NewNop())
	c2.SetObserver(o)
	acks2 := make(chan Ack, 1)
	acks2 <- Ack{End: pos("f.000001", 20)}
	close(acks2)
	_ = c2.Run(context.Background(), acks2)
	if len(o.saved) != 1 || o.saved[0].Pos != 10 || o.failed != 1 {
		t.Fatalf("observer saw %v saved, %d failed", o.saved, o.failed)
	}
}

func TestKeysAndRedaction(t *testing.T) {
	if got := SlotKey("cdc:cp", "lease"); got != "{cdc:cp}:lease" {
		t.Errorf("SlotKey = %s", got)
	}
	if got := SlotKey("{tenant}:cp", "lease"); got != "{tenant}:cp:lease" {
		t.Errorf("SlotKey with a hash tag = %s", got)
	}
	if LeaseKey("k") != "{k}:lease" || FenceKey("k") != "{k}:fence" {
		t.Errorf("LeaseKey %s, FenceKey %s", LeaseKey("k"), FenceKey("k"))
	}
	// A key with a hash tag keeps it (not "{{tenant}:cp}:lease", whose tag
	// would be "{tenant").
	if LeaseKey("{tenant}:cp") != "{tenant}:cp:lease" || FenceKey("x}{t}") != "x}{t}:fence" {
		t.Errorf("LeaseKey %s, FenceKey %s", LeaseKey("{tenant}:cp"), FenceKey("x}{t}"))
	}
	for key, ok := range map[string]bool{"cdc:cp": true, "{im}:cp": true, "cp:{im}": true, "x}{t}": true,
		"a{}b": false, "a}b": false, "a{b": false, "{}": false} {
		cfg := DefaultConfig()
		cfg.Key = key
		err := cfg.Validate()
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "not a Redis Cluster hash tag")) {
			t.Errorf("key %q: %v", key, err)
		}
	}
	c := Config{Password: "secret1", SentinelPassword: "secret2"}
	r := c.Redacted()
	if r.Password != "***" || r.SentinelPassword != "***" || c.Password != "secret1" {
		t.Errorf("Redacted %+v (original %+v)", r, c)
	}
	v := &VanishedError{Key: "k", At: pos("f.000001", 4)}
	if !errors.Is(v, ErrVanished) || !strings.Contains(v.Error(), "f.000001:4") || !strings.Contains(v.Error(), "noeviction") {
		t.Errorf("VanishedError: %v", v)
	}
}

func TestValidateClient(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Password: "a", PasswordFile: "/x"}, "checkpoint.password-file: set either"},
		{Config{PasswordFile: "/nonexistent/redis-password"}, "checkpoint.password-file"},
		{Config{Addrs: []string{"nope"}}, "checkpoint.addrs: \"nope\""},
		{Config{SentinelMaster: "m", Cluster: true}, "choose Sentinel or Cluster"},
		{Config{SentinelMaster: "m"}, "checkpoint.addrs: required with checkpoint.sentinel-master"},
		{Config{Addrs: []string{"r1:6379", "r2:6379"}}, "checkpoint.addrs: [r1:6379 r2:6379]: only used with checkpoint.sentinel-master (the Sentinels) or checkpoint.cluster: true"},
		{Config{Cluster: true, DB: 2}, "only database 0"},
	} {
		var errs []error
		c.cfg.validateClient(&errs)
		if err := errors.Join(errs...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validateClient(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
}

// A plaintext Store reports no TLS; a wrong password is ErrAuth naming the
// settings, never the password.
func TestStoreTLSStateAndAuth(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Key = startRedis(t), "cdc-outbox:auth"
	s := NewStore(cfg)
	defer s.Close()
	if st, err := s.TLSState(context.Background()); st != "" || err != nil {
		t.Fatalf("TLSState = %q, %v", st, err)
	}
	if err := s.rdb.ConfigSet(context.Background(), "requirepass", "right-one").Err(); err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.Password = "wrong-one"
	s2 := NewStore(bad)
	defer s2.Close()
	_, err := s2.Load(context.Background())
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "checkpoint.password") || strings.Contains(err.Error(), "wrong-one") {
		t.Fatalf("Load with a wrong password = %v, want ErrAuth naming the setting", err)
	}
}

// A user without the permission on the checkpoint key is named with the
// ACL fix.
func TestStorePermission(t *testing.T) {
	addr := startRedis(t)
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Addr, cfg.Key = addr, "cdc-outbox:perm"
	admin := NewStore(cfg)
	defer admin.Close()
	if err := admin.rdb.Do(ctx, "ACL", "SETUSER", "ro", "on", ">pw", "~other:*", "+get").Err(); err != nil {
		t.Fatal(err)
	}
	ro := cfg
	ro.Username, ro.Password = "ro", "pw"
	s := NewStore(ro)
	defer s.Close()
	if _, err := s.Load(ctx); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "ACL SETUSER") {
		t.Fatalf("Load without the key permission = %v, want ErrAuth naming the ACL fix", err)
	}
}

// The client follows the configuration: Sentinel, Cluster or one server
// (built without connecting), with the password read from a file.
func TestNewClientKinds(t *testing.T) {
	dir := t.TempDir()
	pwFile := dir + "/pw"
	if err := writeSecret(pwFile, "from-file"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{
		{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, SentinelMaster: "m", SentinelPasswordFile: pwFile, Timeout: time.Second},
		{Addrs: []string{"127.0.0.1:1"}, Cluster: true, Timeout: time.Second},
		{Addr: "127.0.0.1:1", PasswordFile: pwFile, Timeout: time.Second},
	} {
		cl := newClient(c)
		if cl == nil {
			t.Fatalf("newClient(%+v) = nil", c)
		}
		cl.Close()
	}
	// A TLS set-up that cannot be built fails each connection with ErrTLS.
	bad := Config{Addr: "127.0.0.1:1", Timeout: time.Second}
	bad.TLS.Enabled, bad.TLS.CAFile = true, dir+"/missing-ca.pem"
	cl := newClient(bad)
	defer cl.Close()
	if err := cl.Ping(context.Background()).Err(); !errors.Is(err, ErrTLS) {
		t.Fatalf("Ping with an unreadable CA = %v, want ErrTLS", err)
	}
	c := DefaultConfig()
	c.MirrorTopic = "bad topic!"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "checkpoint.mirror-topic") {
		t.Fatalf("Validate = %v, want checkpoint.mirror-topic named", err)
	}
	c = DefaultConfig()
	c.MirrorInterval = time.Millisecond
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "checkpoint.mirror-interval") {
		t.Fatalf("Validate = %v, want checkpoint.mirror-interval named", err)
	}
}

func writeSecret(path, v string) error { return os.WriteFile(path, []byte(v), 0o600) }

// Messages and logs name the Redis the client reaches: with Sentinel or
// Cluster, not checkpoint.addr's default (which is not used then).
func TestWhere(t *testing.T) {
	for _, c := range []struct {
		cfg       Config
		want, key string
	}{
		{DefaultConfig(), "127.0.0.1:6379", "checkpoint.addr"},
		{Config{Addr: "127.0.0.1:6379", SentinelMaster: "m", Addrs: []string{"s1:26379", "s2:26379"}}, "Sentinel master m via s1:26379,s2:26379", "checkpoint.addrs"},
		{Config{Addr: "127.0.0.1:6379", Cluster: true, Addrs: []string{"n1:7000", "n2:7000"}}, "Redis Cluster n1:7000,n2:7000", "checkpoint.addrs"},
		{Config{Addr: "n1:7000", Cluster: true}, "Redis Cluster n1:7000", "checkpoint.addr"},
	} {
		if got := c.cfg.Where(); got != c.want {
			t.Errorf("Where() = %q, want %q", got, c.want)
		}
		if got := c.cfg.AddrKey(); got != c.key {
			t.Errorf("AddrKey() = %q, want %q", got, c.key)
		}
	}
	s := NewStore(Config{Addr: "127.0.0.1:6379", SentinelMaster: "m", Addrs: []string{"127.0.0.1:1"}, Timeout: time.Second, Key: "k"})
	defer s.Close()
	if err := s.fail("write k", errors.New("boom")); strings.Contains(err.Error(), "6379") || !strings.Contains(err.Error(), "Sentinel master m via 127.0.0.1:1") {
		t.Errorf("fail() = %v, want the Sentinels named, not checkpoint.addr", err)
	}
}
