package pipeline

import (
	"context"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/sink"
)

// The Publisher's start-up phases depend on these small interfaces, so
// that they are unit-tested without services (phases_test.go); the
// Publisher wires the real ones.

// server is what a pipeline start asks the source server
// (*binlog.Server; see its methods for the queries and errors).
type server interface {
	ServerID() uint32
	ServerUUID() string
	Flavor() string
	Check(ctx context.Context) error
	Resolve(st binlog.Start) (binlog.Position, error)
	CheckPosition(p binlog.Position) error
	CheckResume(p binlog.Position) (*binlog.Purged, error)
	Skip(pg *binlog.Purged, policy string) (binlog.Position, error)
	CompleteGTIDSet(p binlog.Position) (binlog.Position, error)
	GTIDSetAt(p binlog.Position) (string, error)
	HistoryFacts(p binlog.Position, mode string) (binlog.HistoryFacts, error)
	BinaryLogs() ([]string, error)
	BinaryLogSizes() ([]binlog.LogFile, error)
	Retention() (binlog.Retention, error)
	CheckTables(ts *binlog.TableSet) ([]*binlog.Table, error)
	Columns() ([]string, error)
	Close() error
}

// store is the checkpoint's Redis (*checkpoint.Store): the Backend the
// Writers write through, the preflight's questions, and the record of a
// fatal stop that the status command reads.
type store interface {
	checkpoint.Backend
	Persistent(ctx context.Context) (bool, error)
	MaxMemoryPolicy(ctx context.Context) (policy string, maxmemory int64, err error)
	TTL(ctx context.Context) (time.Duration, error)
	SaveStop(ctx context.Context, st checkpoint.Stop) error
	ClearStop(ctx context.Context) error
	Close() error
}

// mirror is checkpoint.mirror-topic (*sink.Mirror).
type mirror interface {
	checkpoint.Mirror
	Ensure(ctx context.Context) (created bool, err error)
	Topic() string
	Close() error
}

// topics is what the start-up phases read from Kafka: the partition
// counts of topics (PartitionCounts) and the headers of each partition's
// newest record (sink.NewestHeaders).
type topics interface {
	PartitionCounts(ctx context.Context, names []string) (map[string]int, error)
	NewestHeaders(ctx context.Context, topic string) (map[int]map[string]string, error)
}

// kafkaTopics reads them from the brokers of cfg.
type kafkaTopics struct{ cfg sink.Config }

func (k kafkaTopics) PartitionCounts(ctx context.Context, names []string) (map[string]int, error) {
	return PartitionCounts(ctx, k.cfg, names)
}

func (k kafkaTopics) NewestHeaders(ctx context.Context, topic string) (map[int]map[string]string, error) {
	return sink.NewestHeaders(ctx, k.cfg, topic)
}

var (
	_ server = (*binlog.Server)(nil)
	_ store  = (*checkpoint.Store)(nil)
	_ mirror = (*sink.Mirror)(nil)
)
