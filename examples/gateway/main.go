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
package main

import (
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
	mysqlAddr := flag.String("mysql-addr", env("CDC_MYSQL_ADDR", "127.0.0.1:33306"), "MariaDB/MySQL address")
	mysqlUser := flag.String("mysql-user", env("CDC_MYSQL_USER", "root"), "database user")
	mysqlDB := flag.String("mysql-db", env("CDC_MYSQL_DB", "im"), "schema")
	outbox := flag.String("outbox", "im_event_outbox", "outbox table")
	messages := flag.String("messages", "im_message", "message table")
	redisAddr := flag.String("redis", env("CDC_REDIS_ADDR", ""), "Redis for the consumer's dedupe store (empty: in-memory window only)")
	ttl := flag.Duration("dedupe-ttl", 24*time.Hour, "how long handled event ids are remembered in Redis")
	debug := flag.Bool("debug", false, "debug logs")
	flag.Parse()
	// The password from the environment only, so that it is not in ps.
	password := env("CDC_MYSQL_PASSWORD", "root")

	zc := zap.NewDevelopmentConfig()
	if !*debug {
		zc.Level = zap.NewAtomicLevelAt(zap.InfoLevel)
	}
	log, _ := zc.Build()
	defer log.Sync()
	if err := run(log, *listen, strings.Split(*brokers, ","), *topic, *group, *isolation, *redisAddr, *ttl,
		newDB(*mysqlAddr, *mysqlUser, password, *mysqlDB, *outbox, *messages)); err != nil {
		log.Error("gateway stopped", zap.Error(err))
		os.Exit(1)
	}
}

func run(log *zap.Logger, listen string, brokers []string, topic, group, isolation, redisAddr string, ttl time.Duration, d *db) error {
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
		opts.Store = consumer.NewRedisStore(rdb, "im-gateway:"+group+":seen:", ttl)
	}
	cons, err := consumer.New(consumer.Config{Brokers: brokers, Topics: []string{topic}, Group: group, Isolation: isolation,
		CommitInterval: 500 * time.Millisecond, MaxWait: 100 * time.Millisecond}, g.hub, opts)
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
	g.log.Info("gateway listening", zap.String("url", "http://"+ln.Addr().String()+"/"), zap.String("topic", topic), zap.String("group", group))

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
