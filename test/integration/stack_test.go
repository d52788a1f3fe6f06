//go:build integration

package integration

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

var (
	// flavor is the stack's database (scripts/dev-stack.sh env prints
	// CDC_FLAVOR): flavorMariaDB (10.11, the default), flavorMySQL (9.7) or
	// flavorMariaDB11 (11.8).
	flavor     = envOr("CDC_FLAVOR", flavorMariaDB)
	mysqlAddr  = envOr("CDC_MYSQL_ADDR", "127.0.0.1:33306")
	mysqlUser  = envOr("CDC_MYSQL_USER", "root")
	mysqlPass  = envOr("CDC_MYSQL_PASSWORD", "root")
	mysqlDB    = envOr("CDC_MYSQL_DB", "im")
	redisAddr  = envOr("CDC_REDIS_ADDR", "127.0.0.1:36379")
	brokers    = strings.Split(envOr("CDC_KAFKA_BROKERS", "127.0.0.1:39092"), ",")
	binary     string
	runID      = time.Now().Format("150405")
	serverIDs  atomic.Uint32
	partitions = 6
)

// The flavours of scripts/dev-stack.sh (CDC_FLAVOR).
const (
	flavorMariaDB   = "mariadb"
	flavorMySQL     = "mysql"
	flavorMariaDB11 = "mariadb11"
)

// isMySQL reports whether the stack's server is MySQL (not MariaDB).
func isMySQL() bool { return flavor == flavorMySQL }

// serverFlavor is the binlog flavour of the stack's server:
// binlog.FlavorMySQL or binlog.FlavorMariaDB.
func serverFlavor() string {
	if isMySQL() {
		return binlog.FlavorMySQL
	}
	return binlog.FlavorMariaDB
}

// onlyMariaDB skips a test whose subject exists on MariaDB only.
func onlyMariaDB(t *testing.T, why string) {
	t.Helper()
	if isMySQL() {
		t.Skipf("MariaDB only (stack flavour %s): %s", flavor, why)
	}
}

// onlyMySQL skips a test whose subject exists on MySQL only.
func onlyMySQL(t *testing.T, why string) {
	t.Helper()
	if !isMySQL() {
		t.Skipf("MySQL only (stack flavour %s): %s", flavor, why)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cdc-outbox-it")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "cdc-outbox")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/cdc-outbox")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build cdc-outbox:", err)
		os.Exit(1)
	}
	// Fail, not skip, when the stack is down: CI must run these tests.
	if err := ping(); err != nil {
		fmt.Fprintf(os.Stderr, "integration stack not reachable (start it with scripts/dev-stack.sh up): %v\n", err)
		os.Exit(1)
	}
	if os.Getenv("CDC_IT_KEEP_TOPICS") == "" {
		if err := removeStaleTopics(); err != nil {
			fmt.Fprintln(os.Stderr, "remove the topics of earlier runs:", err)
			os.Exit(1)
		}
	}
	serverIDs.Store(6000 + uint32(time.Now().Unix()%1000)*10)
	code := m.Run()
	if table := matrixTable(); table != "" {
		fmt.Print(table)
		if path := os.Getenv("CDC_FAULT_REPORT"); path != "" {
			_ = os.WriteFile(path, []byte(table), 0o644)
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// staleTopicPrefixes are the names of the topics the tests make: "it." (each env's
// topic, its dead-letter topic, package sink's broker tests "it.sink.") and "outbox."
// (the Debezium-style topics of the mapping tests).
var staleTopicPrefixes = []string{"it.", "outbox."}

// removeStaleTopics deletes the topics earlier test runs left on the stack's broker
// (the demo's and the checkpoint mirror topic stay). Each full run leaves about a
// thousand; a broker holding several runs' worth restarts slowly after a kill -9 (about
// 8 ms a partition on 2 cores), and the fault tests restart it. Set CDC_IT_KEEP_TOPICS=1
// to keep them, for instance while another run uses the same stack.
func removeStaleTopics() error {
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 60 * time.Second}
	ctx := context.Background()
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	var stale []string
	for _, tp := range md.Topics {
		for _, p := range staleTopicPrefixes {
			if strings.HasPrefix(tp.Name, p) {
				stale = append(stale, tp.Name)
				break
			}
		}
	}
	for len(stale) > 0 {
		n := min(len(stale), 200)
		res, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: stale[:n]})
		if err != nil {
			return fmt.Errorf("delete %d topics: %w", n, err)
		}
		for topic, err := range res.Errors {
			if err != nil && !errors.Is(err, kafka.UnknownTopicOrPartition) {
				return fmt.Errorf("delete topic %s: %w", topic, err)
			}
		}
		stale = stale[n:]
	}
	return nil
}

func ping() error {
	c, err := client.Connect(mysqlAddr, mysqlUser, mysqlPass, mysqlDB)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flavor, mysqlAddr, err)
	}
	c.Close()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", redisAddr, err)
	}
	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		return fmt.Errorf("kafka %s: %w", brokers[0], err)
	}
	conn.Close()
	return nil
}

// env is one test's isolated world: its own outbox and message tables,
// topic, checkpoint key and replica server_id, on the shared stack.
type env struct {
	t            *testing.T
	name         string
	outbox       string
	message      string
	topic        string
	key          string
	serverID     uint32
	dir          string
	extra        string // appended to the YAML config
	noMirror     bool   // checkpoint.mirror-topic "": the checkpoint in Redis only
	sourceExtra  string // appended to the YAML config's source section (indented by 2)
	readTimeout  string // source.read-timeout (default 5s)
	batchBytes   int
	batchSize    int
	sourceAddr   string   // overrides the MariaDB address the publisher uses
	kafka        []string // overrides the brokers the publisher uses
	positionMode string
	noHA         bool          // ha.enabled: false
	leaseTTL     time.Duration // ha.lease-ttl (default 3s in tests)
	haGroup      string        // ha.group (default: the test's own)
	configText   string        // when set, the whole configuration file instead of the generated one
	redisYAML    string        // replaces the checkpoint section's "addr:" line (Sentinel, Cluster; later lines indented by 2)
	kafkaExtra   string        // appended to the YAML config's kafka section (indented by 2)
	haExtra      string        // appended to the YAML config's ha section (indented by 2)
}

// worldRuns counts the worlds made under each name in this process, so that
// a test run again (go test -count N) gets new tables, topic, checkpoint key
// and consumer group instead of the last run's.
var worldRuns = &nameCounter{seen: map[string]int{}}

type nameCounter struct {
	mu   sync.Mutex
	seen map[string]int
}

// next returns how many times name was asked for, this time included.
func (c *nameCounter) next(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[name]++
	return c.seen[name]
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvNamed(t, t.Name())
}

// newEnvNamed is newEnv for a world named after name (several in one test).
func newEnvNamed(t *testing.T, testName string) *env {
	t.Helper()
	e := newTablesNamed(t, testName)
	createTopic(t, e.topic, partitions)
	return e
}

// newTables is newEnv without the topic.
func newTables(t *testing.T) *env {
	t.Helper()
	return newTablesNamed(t, t.Name())
}

// newTablesNamed is newEnvNamed without the topic.
func newTablesNamed(t *testing.T, testName string) *env {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(testName)) + "_" + runID
	if n := worldRuns.next(name); n > 1 { // go test -count N: a fresh world each time
		name += fmt.Sprintf("_%d", n)
	}
	e := &env{t: t, name: name, outbox: "ob_" + name, message: "msg_" + name, topic: "it." + name,
		key: "cdc-outbox:it:" + name, serverID: serverIDs.Add(32) - 31, dir: t.TempDir()} // ha.server-ids 16 for the publishers, then replay's default
	if len(e.outbox) > 64 {
		t.Fatalf("table name too long: %s", e.outbox)
	}
	ddl, err := os.ReadFile("../../schema/" + serverFlavor() + ".sql")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(ddl), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	sql := strings.ReplaceAll(strings.ReplaceAll(strings.Join(lines, "\n"), "im_event_outbox", e.outbox), "im_message", e.message)
	c := e.sql()
	defer c.Close()
	for _, stmt := range strings.Split(sql, ";") {
		if strings.Contains(stmt, "CREATE TABLE") {
			if _, err := c.Execute(stmt); err != nil {
				t.Fatalf("create table: %v", err)
			}
		}
	}
	return e
}

func (e *env) sql() *client.Conn {
	c, err := client.Connect(mysqlAddr, mysqlUser, mysqlPass, mysqlDB)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// sourceServerID returns the source's own @@server_id.
func (e *env) sourceServerID() uint32 {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	r, err := c.Execute("SELECT @@server_id")
	if err != nil {
		e.t.Fatal(err)
	}
	id, _ := r.GetUint(0, 0)
	return uint32(id)
}

func (e *env) writer() *workload.Writer {
	w, err := workload.Open(mysqlAddr, mysqlUser, mysqlPass, mysqlDB, e.outbox, e.message)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { w.Close() })
	return w
}

// mirrorTopic is the checkpoint mirror topic of the test's config: the
// shared default (each test has its own checkpoint key), "" with noMirror.
func (e *env) mirrorTopic() string {
	if e.noMirror {
		return ""
	}
	return checkpoint.DefaultMirrorTopic
}

func (e *env) config() string {
	cfg := fmt.Sprintf(`source:
  addr: %s
  user: %s
  password: %s
  server-id: %d
  schema: %s
  table: %s
  start: latest
  position-mode: %s
  heartbeat-period: 1s
  read-timeout: %s
%srouter:
  topic: %s
kafka:
  brokers: [%s]
  batch-bytes: %d
  batch-size: %d
%scheckpoint:
  %s
  key: %q
  interval: 200ms
  mirror-topic: %q
  mirror-interval: 1s
log:
  format: json
  level: info
shutdown-timeout: 10s
retry-backoff-max: 2s
ha:
  enabled: %v
  lease-ttl: %s
  group: %q
%s`, cmp.Or(e.sourceAddr, mysqlAddr), mysqlUser, mysqlPass, e.serverID, mysqlDB, e.outbox, cmp.Or(e.positionMode, "file"), cmp.Or(e.readTimeout, "5s"), e.sourceExtra, e.topic, strings.Join(e.brokers(), ","), max(e.batchBytes, 1000000), cmp.Or(e.batchSize, 2000), e.kafkaExtra, cmp.Or(e.redisYAML, "addr: "+redisAddr), e.key, e.mirrorTopic(),
		!e.noHA, cmp.Or(e.leaseTTL, 3*time.Second), cmp.Or(e.haGroup, e.key+":instances"), e.haExtra)
	if strings.Contains(e.sourceExtra, "  tables:") {
		// source.table is refused beside source.tables.
		cfg = strings.Replace(cfg, fmt.Sprintf("  table: %s\n", e.outbox), "", 1)
	}
	if e.configText != "" {
		cfg = e.configText
	}
	if !strings.Contains(cfg+e.extra, "metrics-addr:") {
		cfg += "metrics-addr: 127.0.0.1:0\n" // several publishers at once: a free port each
	}
	path := filepath.Join(e.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg+e.extra), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// brokers returns the brokers the publisher uses.
func (e *env) brokers() []string {
	if len(e.kafka) > 0 {
		return e.kafka
	}
	return brokers
}

// publisher is a running cdc-outbox process.
type publisher struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

var runs atomic.Int32

// start runs cdc-outbox and waits until it streams the binlog.
func (e *env) start(args ...string) *publisher {
	e.t.Helper()
	p := e.launch(args...)
	e.waitLog(p, "streaming binlog", 60*time.Second)
	return p
}

// launch runs cdc-outbox without waiting.
func (e *env) launch(args ...string) *publisher {
	e.t.Helper()
	logPath := filepath.Join(e.dir, fmt.Sprintf("publisher-%d.log", runs.Add(1)))
	f, err := os.Create(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(binary, append([]string{"run", "--config", e.config()}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &publisher{cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if e.t.Failed() || os.Getenv("CDC_KEEP_LOGS") != "" {
			b, _ := os.ReadFile(logPath)
			e.t.Logf("publisher log %s:\n%s", logPath, tail(string(b), 40))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitLog waits until the publisher's log has a line containing msg.
func (e *env) waitLog(p *publisher, msg string, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if logHas(p.log, msg) {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			b, _ := os.ReadFile(p.log)
			e.t.Fatalf("publisher exited (%v) before logging %q:\n%s", err, msg, tail(string(b), 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
	e.t.Fatalf("publisher did not log %q within %s", msg, timeout)
}

func logHas(path, msg string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), msg) {
			return true
		}
	}
	return false
}

// kill sends SIGKILL and waits for the process to end.
func (p *publisher) kill(t *testing.T) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	err := <-p.done
	p.done <- err
}

// stop sends SIGTERM and returns the exit code.
func (p *publisher) stop(t *testing.T, timeout time.Duration) int {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("publisher did not exit within %s after SIGTERM", timeout)
	}
	return -1
}

// consume polls the topic into c until c is complete or timeout.
func (e *env) consume(c *verify.Checker, cons *verify.Consumer, timeout time.Duration) verify.Report {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		recs, err := cons.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			e.t.Fatalf("consume %s: %v", e.topic, err)
		}
		c.Add(recs...)
		if c.Complete() || ctx.Err() != nil {
			return c.Report()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkpoint returns the stored checkpoint, or nil.
func (e *env) checkpoint() *checkpoint.Checkpoint {
	e.t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	b, err := rdb.Get(context.Background(), e.key).Bytes()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var cp checkpoint.Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		e.t.Fatal(err)
	}
	return &cp
}

// masterPos returns the current binlog file and position.
func (e *env) masterPos() (string, uint32) {
	c := e.sql()
	defer c.Close()
	r, err := binlogStatus(c)
	if err != nil {
		e.t.Fatal(err)
	}
	f, _ := r.GetString(0, 0)
	p, _ := r.GetUint(0, 1)
	return f, uint32(p)
}

// binlogEnd returns the current end of the binlog with the server's GTID
// set there (MySQL: Executed_Gtid_Set; MariaDB: BINLOG_GTID_POS).
func (e *env) binlogEnd() binlog.Position {
	c := e.sql()
	defer c.Close()
	r, err := binlogStatus(c)
	if err != nil {
		e.t.Fatal(err)
	}
	var p binlog.Position
	p.File, _ = r.GetString(0, 0)
	pos, _ := r.GetUint(0, 1)
	p.Pos = uint32(pos)
	if isMySQL() {
		set, _ := r.GetStringByName(0, "Executed_Gtid_Set")
		p.GTIDSet = strings.ReplaceAll(set, "\n", "")
		return p
	}
	g, err := c.Execute("SELECT BINLOG_GTID_POS(?, ?)", p.File, p.Pos)
	if err != nil {
		e.t.Fatal(err)
	}
	p.GTIDSet, _ = g.GetString(0, 0)
	return p
}

// binlogStatus runs SHOW BINARY LOG STATUS (MySQL 8.2+, MariaDB 10.5.2+),
// or SHOW MASTER STATUS where the server does not know it (MySQL 9 removed
// the latter).
func binlogStatus(c *client.Conn) (*mysql.Result, error) {
	r, err := c.Execute("SHOW BINARY LOG STATUS")
	var me *mysql.MyError
	if errors.As(err, &me) && me.Code == mysql.ER_PARSE_ERROR {
		return c.Execute("SHOW MASTER STATUS")
	}
	return r, err
}

func requireOK(t *testing.T, rep verify.Report) {
	t.Helper()
	t.Logf("verify: %s", rep.String())
	if !rep.OK() {
		t.Fatalf("delivery broken: %s\n%s", rep.String(), strings.Join(rep.Problems, "\n"))
	}
}
