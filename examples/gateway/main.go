// Command gateway is a small IM gateway on top of package consumer: users
// connect over WebSocket (/ws?user=ID&since=CONV:SEQ,…) and receive the
// messages of their conversations in seq_no order, each once. A user who
// was offline gets what they missed from the outbox table on connect, then
// the live messages that cdc-outbox published to Kafka; so "user B comes
// online and sees A's messages" holds across publisher and gateway
// restarts. POST /api/send writes a message and its outbox row in one
// transaction, as the application does; / serves a chat page (static/).
//
//	go run ./examples/gateway -listen 127.0.0.1:8080 -topic im.events
//	open http://127.0.0.1:8080/?user=1&peer=2 and http://127.0.0.1:8080/?user=2&peer=1
//
// Flags default from the dev stack's environment (CDC_KAFKA_BROKERS,
// CDC_MYSQL_*, CDC_REDIS_ADDR).
//
// A secured Kafka (managed Kafka: MSK, Confluent Cloud, Aiven): the
// consumer package's TLS and SASL settings, the publisher's kafka.tls and
// kafka.sasl, either as flags for TLS and a PLAIN/SCRAM login (the password
// from CDC_KAFKA_SASL_PASSWORD or a file, never a flag), or every setting
// (OAUTHBEARER, AWS_MSK_IAM, ...) in a YAML file of package consumer's
// Config given to -consumer-config; flags given override the file:
//
//	CDC_KAFKA_SASL_PASSWORD=... go run ./examples/gateway -brokers b-1.example:9096 \
//	  -kafka-tls -kafka-tls-ca-file ca.pem -kafka-sasl-mechanism SCRAM-SHA-512 -kafka-sasl-username gateway
//	go run ./examples/gateway -consumer-config consumer.yaml   # brokers, tls, sasl, isolation, ...
package main

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"gopkg.in/yaml.v3"
)

//go:embed static
var static embed.FS

type gateway struct {
	db  *db
	hub *hub
	log *zap.Logger
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP address (page, /ws, /api/send, /metrics)")
	brokers := flag.String("brokers", env("CDC_KAFKA_BROKERS", "127.0.0.1:39092"), "Kafka brokers, comma-separated")
	topic := flag.String("topic", "im.events", "the publisher's topic")
	group := flag.String("group", "im-gateway", "consumer group")
	isolation := flag.String("isolation", consumer.ReadUncommitted, "read_uncommitted or read_committed (publisher in exactly-once mode)")
	consumerConfig := flag.String("consumer-config", "", "YAML file of package consumer's Config (brokers, tls, sasl as the publisher's kafka.tls and kafka.sasl, isolation, ...); flags given override it")
	var sec consumer.Config
	flag.BoolVar(&sec.TLS.Enabled, "kafka-tls", false, "TLS to the brokers (the publisher's kafka.tls.enabled)")
	flag.StringVar(&sec.TLS.CAFile, "kafka-tls-ca-file", "", "PEM file of the CAs of the brokers' certificates (default: the system's)")
	flag.StringVar(&sec.TLS.CertFile, "kafka-tls-cert-file", "", "client certificate (PEM) for mutual TLS")
	flag.StringVar(&sec.TLS.KeyFile, "kafka-tls-key-file", "", "client key (PEM) for mutual TLS")
	flag.StringVar(&sec.TLS.ServerName, "kafka-tls-server-name", "", "the name on the brokers' certificates when it is not the host")
	flag.StringVar(&sec.SASL.Mechanism, "kafka-sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (OAUTHBEARER and AWS_MSK_IAM: -consumer-config)")
	flag.StringVar(&sec.SASL.Username, "kafka-sasl-username", "", "SASL user")
	flag.StringVar(&sec.SASL.PasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password (or set CDC_KAFKA_SASL_PASSWORD)")
	mysqlAddr := flag.String("mysql-addr", env("CDC_MYSQL_ADDR", "127.0.0.1:33306"), "MariaDB/MySQL address")
	mysqlUser := flag.String("mysql-user", env("CDC_MYSQL_USER", "root"), "database user")
	mysqlDB := flag.String("mysql-db", env("CDC_MYSQL_DB", "im"), "schema")
	outbox := flag.String("outbox", "im_event_outbox", "outbox table")
	messages := flag.String("messages", "im_message", "message table")
	redisAddr := flag.String("redis", env("CDC_REDIS_ADDR", ""), "Redis for the consumer's dedupe store (empty: in-memory window only)")
	ttl := flag.Duration("dedupe-ttl", 24*time.Hour, "how long handled event ids are remembered in Redis")
	debug := flag.Bool("debug", false, "debug logs")
	flag.Parse()
	// The passwords from the environment only, so that they are not in ps.
	password := env("CDC_MYSQL_PASSWORD", "root")
	sec.SASL.Password = os.Getenv("CDC_KAFKA_SASL_PASSWORD")

	zc := zap.NewDevelopmentConfig()
	if !*debug {
		zc.Level = zap.NewAtomicLevelAt(zap.InfoLevel)
	}
	log, _ := zc.Build()
	defer log.Sync()
	cfg, err := consumerConfigOf(*consumerConfig, sec, strings.Split(*brokers, ","), *topic, *group, *isolation)
	if err == nil {
		err = run(log, *listen, cfg, *redisAddr, *ttl, newDB(*mysqlAddr, *mysqlUser, password, *mysqlDB, *outbox, *messages))
	}
	if err != nil {
		log.Error("gateway stopped", zap.Error(err))
		os.Exit(1)
	}
}

// consumerConfigOf returns the consumer's Config: the YAML file path (if
// any), then the flags given on the command line (sec's TLS and SASL,
// brokers, topic, group, isolation) over it; brokers, topic, group and
// isolation take the flags' defaults where the file leaves them empty.
func consumerConfigOf(path string, sec consumer.Config, brokers []string, topic, group, isolation string) (consumer.Config, error) {
	var cfg consumer.Config
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("-consumer-config: %w", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("-consumer-config %s: %w (the keys are package consumer's Config: brokers, topics, group, tls, sasl, isolation, layout, ...)", path, err)
		}
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pick := func(name string, dst *string, v string) {
		if set[name] || *dst == "" {
			*dst = v
		}
	}
	if set["brokers"] || len(cfg.Brokers) == 0 {
		cfg.Brokers = brokers
	}
	if set["topic"] || len(cfg.Topics) == 0 {
		cfg.Topics = []string{topic}
	}
	pick("group", &cfg.Group, group)
	pick("isolation", &cfg.Isolation, isolation)
	if set["kafka-tls"] {
		cfg.TLS.Enabled = sec.TLS.Enabled
	}
	for name, f := range map[string][2]*string{
		"kafka-tls-ca-file": {&cfg.TLS.CAFile, &sec.TLS.CAFile}, "kafka-tls-cert-file": {&cfg.TLS.CertFile, &sec.TLS.CertFile},
		"kafka-tls-key-file": {&cfg.TLS.KeyFile, &sec.TLS.KeyFile}, "kafka-tls-server-name": {&cfg.TLS.ServerName, &sec.TLS.ServerName},
		"kafka-sasl-mechanism": {&cfg.SASL.Mechanism, &sec.SASL.Mechanism}, "kafka-sasl-username": {&cfg.SASL.Username, &sec.SASL.Username},
		"kafka-sasl-password-file": {&cfg.SASL.PasswordFile, &sec.SASL.PasswordFile},
	} {
		if set[name] {
			*f[0] = *f[1]
		}
	}
	if sec.SASL.Password != "" {
		cfg.SASL.Password = sec.SASL.Password
	}
	return cfg, nil
}

func run(log *zap.Logger, listen string, cfg consumer.Config, redisAddr string, ttl time.Duration, d *db) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer d.close()
	g := &gateway{db: d, hub: newHub(), log: log.Named("gateway")}

	reg := prometheus.NewRegistry()
	opts := consumer.Options{Logger: log, Metrics: consumer.NewMetrics(reg),
		OnGap: func(_ context.Context, gap consumer.Gap) error {
			// Sessions fill a gap from the table before the next message; the
			// gap is still worth a look (lost rows upstream, a skipped range).
			g.log.Warn("seq_no gap", zap.String("conversation_id", gap.Key), zap.Int64("after", gap.After), zap.Int64("next", gap.Next))
			return nil
		}}
	if redisAddr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
		defer rdb.Close()
		opts.Store = consumer.NewRedisStore(rdb, "im-gateway:"+cfg.Group+":seen:", ttl)
	}
	cfg.CommitInterval = cmp.Or(cfg.CommitInterval, 500*time.Millisecond)
	cfg.MaxWait = cmp.Or(cfg.MaxWait, 100*time.Millisecond)
	cons, err := consumer.New(cfg, g.hub, opts)
	if err != nil {
		return err
	}

	page, _ := fs.Sub(static, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(page))
	mux.HandleFunc("GET /ws", g.ws)
	mux.HandleFunc("POST /api/send", g.send)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	g.log.Info("gateway listening", zap.String("url", "http://"+ln.Addr().String()+"/"), zap.Strings("topics", cfg.Topics), zap.String("group", cfg.Group))

	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() error { return cons.Run(ectx) })
	eg.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	eg.Go(func() error {
		<-ectx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	})
	err = eg.Wait()
	g.log.Info("gateway stopped")
	return err
}

// ws: /ws?user=ID&since=CONV:SEQ,CONV:SEQ (the last seq_no the page has
// per conversation; empty: everything).
func (g *gateway) ws(w http.ResponseWriter, r *http.Request) {
	user, err := strconv.ParseInt(r.URL.Query().Get("user"), 10, 64)
	if err != nil || user <= 0 {
		http.Error(w, "user: want a positive integer, e.g. /ws?user=1", http.StatusBadRequest)
		return
	}
	since, err := parseSince(r.URL.Query().Get("since"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept wrote the response
	}
	defer c.CloseNow()
	if err := g.serve(r.Context(), c, user, since); err != nil && r.Context().Err() == nil {
		g.log.Debug("session ended", zap.Int64("user", user), zap.Error(err))
		c.Close(websocket.StatusInternalError, "gateway error: reconnect")
	}
}

func parseSince(s string) (map[int64]int64, error) {
	out := map[int64]int64{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		c, q, ok := strings.Cut(part, ":")
		conv, err1 := strconv.ParseInt(c, 10, 64)
		seq, err2 := strconv.ParseInt(q, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("since: %q: want CONVERSATION:SEQ_NO[,…]", part)
		}
		out[conv] = seq
	}
	return out, nil
}

// send: POST /api/send {"from":1,"to":2,"text":"hi"} → {"conversation_id":…,"seq_no":…}.
func (g *gateway) send(w http.ResponseWriter, r *http.Request) {
	var req struct {
		From int64  `json:"from"`
		To   int64  `json:"to"`
		Text string `json:"text"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || req.From <= 0 || req.To <= 0 {
		http.Error(w, `want {"from":1,"to":2,"text":"…"} with positive user ids`, http.StatusBadRequest)
		return
	}
	conv, seq, err := g.db.send(r.Context(), req.From, req.To, req.Text)
	if err != nil {
		g.log.Warn("send failed", zap.Error(err))
		http.Error(w, "send failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int64{"conversation_id": conv, "seq_no": seq})
}
