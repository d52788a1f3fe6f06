package sink

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/rawconn"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	initAPI "github.com/segmentio/kafka-go/protocol/initproducerid"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// transport is what the Producer needs of the cluster: *cluster, or a
// fake broker in tests.
type transport interface {
	// metadata returns topic's partitions, cached up to metadataTTL
	// unless fresh.
	metadata(ctx context.Context, topic string, fresh bool) (*metadataAPI.ResponseTopic, error)
	// produce sends req to broker leader and returns its pending answer
	// (a *produceAPI.Response).
	produce(ctx context.Context, leader int32, req *rawproduce.Request) (pending, error)
	// initProducerID returns a producer id and epoch (InitProducerId
	// without a transactional id, KIP-98); given the current ones (not
	// -1) it asks for the epoch bump of KIP-360.
	initProducerID(ctx context.Context, pid int64, epoch int16) (int64, int16, error)
	// stale drops the cached metadata (a leader moved, a broker failed).
	stale()
	// abandon breaks the produce connection to broker id: its requests in
	// flight fail at once with errLeaderMoved (their outcome unknown).
	abandon(id int32)
	close()
}

// metadataCache is a transport whose cached metadata can be had without
// a context (*cluster): the Producer looks there first, every round.
type metadataCache interface {
	// cached returns topic's metadata while cached (metadataTTL), or nil.
	cached(topic string) *metadataAPI.ResponseTopic
}

// pending is a request in flight.
type pending interface {
	wait(ctx context.Context) (protocol.Message, error)
	ready() <-chan struct{} // closed once the answer (or the failure) is in
}

// metadataTTL is how long a topic's metadata is used without asking
// again (errors drop it at once): how late a new partition count or a
// leader moved without an error is seen.
const metadataTTL = 2 * time.Second

// cluster follows a Kafka cluster: the brokers it advertises, the
// topics' leaders and one connection per broker for produce requests,
// plus one metadata connection. The configured brokers serve the first
// contact only: afterwards metadata is asked of any live broker the
// cluster advertised (then the configured ones again), each dial and
// handshake bounded by dialTimeout so that a dead or paused broker costs
// at most that before the next one is tried. Not safe for concurrent use.
type cluster struct {
	bootstrap   []string
	dialTimeout time.Duration
	allowAuto   bool // kafka.allow-auto-topic-creation
	log         *zap.Logger
	sec         *Security // kafka.tls, kafka.sasl (security.go); nil: plaintext
	pace        Pacer     // holds the produce answers' wake-ups in the source's pauses; nil: none

	brokers map[int32]string // advertised, by node id
	conns   map[int32]*brokerConn
	meta    *brokerConn // the metadata connection
	topics  map[string]cachedTopic
	next    int // rotation among the candidates for the metadata connection
}

// Pacer holds a connection's wake-ups while the source pauses
// (rawconn.Pace): Hold raises the mark of hold's connection (a
// rawconn.HoldAnswers function) until the pause ends, if one is on, and
// reports whether it did. Safe for concurrent use; must not block.
type Pacer interface {
	Hold(hold func(on bool) bool) bool
}

type cachedTopic struct {
	t  *metadataAPI.ResponseTopic
	at time.Time
}

func newCluster(bootstrap []string, dialTimeout time.Duration, allowAuto bool, log *zap.Logger) *cluster {
	return &cluster{bootstrap: bootstrap, dialTimeout: dialTimeout, allowAuto: allowAuto, log: log,
		brokers: map[int32]string{}, conns: map[int32]*brokerConn{}, topics: map[string]cachedTopic{}}
}

func (c *cluster) stale() { clear(c.topics) }

func (c *cluster) abandon(id int32) {
	if bc := c.conns[id]; bc != nil {
		bc.abandon(errLeaderMoved)
		delete(c.conns, id)
	}
	c.stale()
}

func (c *cluster) close() {
	if c.meta != nil {
		c.meta.close()
		c.meta = nil
	}
	for id, bc := range c.conns {
		bc.close()
		delete(c.conns, id)
	}
}

// candidates returns the addresses to try for the metadata connection:
// the advertised brokers, rotating, then the configured ones not among them.
func (c *cluster) candidates() []string {
	ids := make([]int32, 0, len(c.brokers))
	for id := range c.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []string
	for i := range ids {
		out = append(out, c.brokers[ids[(i+c.next)%len(ids)]])
	}
	c.next++
	for _, b := range c.bootstrap {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// metaRoundTrip sends msg on the metadata connection, moving on to the
// next candidate broker when a connection cannot be had or fails. A new
// metadata connection is dialled to the candidates in turn, each started
// dialStagger after the previous one unless one answered already (dialFirst),
// so that a dead or paused broker first in line costs dialStagger, not
// dialTimeout. Each round trip is bounded by dialTimeout (metadata and
// InitProducerId answers are quick), and under a ctx deadline by half
// of what it leaves (metaTryTimeout), so that a paused broker holding the
// connection leaves time to ask a healthy one (the checkpoint mirror's
// copy has checkpoint.timeout, 2 s, for everything). It returns every
// error when every candidate failed.
func (c *cluster) metaRoundTrip(ctx context.Context, msg protocol.Message) (protocol.Message, error) {
	var errs []error
	tried := map[string]bool{}
	for ctx.Err() == nil {
		if c.meta == nil || !c.meta.alive() {
			if c.meta != nil {
				c.meta.close()
				c.meta = nil
			}
			var cands []string
			for _, a := range c.candidates() {
				if !tried[a] {
					cands = append(cands, a)
				}
			}
			if len(cands) == 0 {
				break
			}
			bc, derrs := dialFirst(ctx, cands, c.dialTimeout, c.sec)
			errs = append(errs, derrs...)
			if bc == nil {
				break
			}
			c.meta = bc
		}
		tried[c.meta.addr] = true
		try := c.dialTimeout
		if dl, ok := ctx.Deadline(); ok {
			try = metaTryTimeout(c.dialTimeout, time.Until(dl))
		}
		// Bounded by kafka.dial-timeout, or by what the caller's deadline
		// leaves (whose end is the caller's error).
		within := withinDial
		if try < c.dialTimeout {
			within = ""
		}
		tctx, cancel := context.WithTimeout(ctx, try)
		res, err := c.meta.roundTrip(tctx, msg, try, within)
		if err != nil && within != "" && ownDeadlinePassed(ctx, tctx) && !errors.Is(err, ErrBrokerSilent) {
			err = &TimeoutError{Addr: c.meta.addr, What: "a " + msg.ApiKey().String() + " request", Within: within, Bound: try, Err: err}
		}
		cancel()
		if err == nil {
			return res, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", c.meta.addr, err))
		c.meta.close()
		c.meta = nil
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// metaTryTimeout bounds one metadata round trip on one broker, given the
// dial timeout and what is left of the caller's deadline: half of it, so
// that another broker can still be asked when this one does not answer
// (paused), never more than dial, and all of it when half would be
// shorter than dialStagger.
func metaTryTimeout(dial, left time.Duration) time.Duration {
	t := min(dial, left/2)
	if t < dialStagger {
		t = min(dial, left)
	}
	return max(t, 0)
}

// dialStagger is how long dialFirst waits for a broker before dialling
// the next one too.
const dialStagger = 250 * time.Millisecond

// dialFirst dials addrs, the i-th from i × dialStagger on unless one
// connected before, and returns the first connection whose handshake
// completed (the others are closed) with the errors of those that failed;
// nil when none connected within timeout.
func dialFirst(ctx context.Context, addrs []string, timeout time.Duration, sec *Security) (*brokerConn, []error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		bc  *brokerConn
		err error
	}
	results := make(chan result, len(addrs))
	var g errgroup.Group
	for i, addr := range addrs {
		g.Go(func() error {
			t := time.NewTimer(time.Duration(i) * dialStagger)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				results <- result{nil, ctx.Err()}
				return nil
			}
			bc, err := dialBroker(ctx, addr, timeout, sec)
			if err != nil {
				err = fmt.Errorf("%s: %w", addr, err)
			}
			results <- result{bc, err}
			return nil
		})
	}
	var best *brokerConn
	var errs []error
	for range addrs {
		r := <-results
		switch {
		case r.err != nil:
			if best == nil {
				errs = append(errs, r.err)
			}
		case best == nil:
			best = r.bc
			cancel() // the dials still under way give up at once
		default:
			r.bc.close()
		}
	}
	_ = g.Wait()
	if best != nil {
		errs = nil
	}
	return best, errs
}

func (c *cluster) cached(topic string) *metadataAPI.ResponseTopic {
	if ct, ok := c.topics[topic]; ok && time.Since(ct.at) < metadataTTL {
		return ct.t
	}
	return nil
}

func (c *cluster) metadata(ctx context.Context, topic string, fresh bool) (*metadataAPI.ResponseTopic, error) {
	if t := c.cached(topic); t != nil && !fresh {
		return t, nil
	}
	res, err := c.metaRoundTrip(ctx, &metadataAPI.Request{TopicNames: []string{topic}, AllowAutoTopicCreation: c.allowAuto})
	if err != nil {
		return nil, fmt.Errorf("metadata of topic %s: %w", topic, err)
	}
	r := res.(*metadataAPI.Response)
	if len(r.Brokers) > 0 {
		clear(c.brokers)
		for _, b := range r.Brokers {
			c.brokers[b.NodeID] = fmt.Sprintf("%s:%d", b.Host, b.Port)
		}
		for id, bc := range c.conns {
			if c.brokers[id] != bc.addr {
				// The broker left the cluster (fenced) or moved: its
				// requests in flight are retried elsewhere.
				bc.abandon(errLeaderMoved)
				delete(c.conns, id)
			}
		}
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.Name != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("metadata of topic %s: %w", topic, kafka.Error(t.ErrorCode))
		}
		if len(t.Partitions) == 0 {
			return nil, fmt.Errorf("metadata of topic %s: %w", topic, kafka.LeaderNotAvailable)
		}
		c.topics[topic] = cachedTopic{t, time.Now()}
		return t, nil
	}
	return nil, fmt.Errorf("metadata of topic %s: %w", topic, kafka.UnknownTopicOrPartition)
}

// produceMargin is added to a Produce request's own timeout (the
// broker's wait for the replicas, kafka.write-timeout) for the answer's
// deadline.
const produceMargin = time.Second

// Produce request versions the Producer encodes: v3 (record batches,
// KIP-98) to v8, kafka-go's highest.
const (
	produceMinVersion = 3
	produceMaxVersion = 8
)

func (c *cluster) produce(ctx context.Context, leader int32, req *rawproduce.Request) (pending, error) {
	bc := c.conns[leader]
	if bc == nil || !bc.alive() {
		if bc != nil {
			bc.close()
			delete(c.conns, leader)
		}
		addr, ok := c.brokers[leader]
		if !ok {
			c.stale()
			return nil, fmt.Errorf("broker %d: %w", leader, kafka.LeaderNotAvailable)
		}
		var err error
		if bc, err = dialBroker(ctx, addr, c.dialTimeout, c.sec); err != nil {
			c.stale()
			return nil, err
		}
		if c.pace != nil {
			bc.hold = rawconn.HoldAnswers(bc.nc)
		}
		c.conns[leader] = bc
	}
	cl, err := bc.send(req, produceMinVersion, produceMaxVersion, time.Duration(req.Timeout)*time.Millisecond+produceMargin, withinWrite)
	if err != nil {
		c.stale()
		return nil, err
	}
	if c.pace != nil {
		c.pace.Hold(bc.hold)
	}
	return cl, nil
}

func (c *cluster) initProducerID(ctx context.Context, pid int64, epoch int16) (int64, int16, error) {
	res, err := c.metaRoundTrip(ctx, &initAPI.Request{ProducerID: pid, ProducerEpoch: epoch, TransactionTimeoutMs: math.MaxInt32})
	if err != nil {
		return -1, -1, fmt.Errorf("init producer id: %w", err)
	}
	r := res.(*initAPI.Response)
	if r.ErrorCode != 0 {
		switch kafka.Error(r.ErrorCode) {
		case kafka.GroupLoadInProgress, kafka.GroupCoordinatorNotAvailable, kafka.NotCoordinatorForGroup:
			// COORDINATOR_LOAD_IN_PROGRESS and its kin: this broker cannot
			// hand out producer ids now (its block request to the controller
			// is pending, e.g. on a paused controller, for up to the
			// controller's request timeout, 30 s). Another broker may
			// have a block: the next try asks the next candidate.
			c.meta.close()
			c.meta = nil
		}
		return -1, -1, fmt.Errorf("init producer id: %w", kafka.Error(r.ErrorCode))
	}
	return r.ProducerID, r.ProducerEpoch, nil
}
