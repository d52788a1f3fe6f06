package sink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	addAPI "github.com/segmentio/kafka-go/protocol/addpartitionstotxn"
	endAPI "github.com/segmentio/kafka-go/protocol/endtxn"
	findAPI "github.com/segmentio/kafka-go/protocol/findcoordinator"
	initAPI "github.com/segmentio/kafka-go/protocol/initproducerid"
	"go.uber.org/zap"
)

// Delivery guarantees accepted in Config.Delivery.
const (
	DeliveryAtLeastOnce = "at-least-once"
	DeliveryExactlyOnce = "exactly-once"
)

// ExactlyOnce reports whether the configuration asks for exactly-once
// delivery (Kafka transactions).
func (c *Config) ExactlyOnce() bool { return c.Delivery == DeliveryExactlyOnce }

// DefaultTransactionalID is the transactional id of exactly-once delivery
// when kafka.transactional-id is not set: derived from the checkpoint key,
// so that it is unique per source and stable across restarts.
func DefaultTransactionalID(checkpointKey string) string { return "cdc-outbox-" + checkpointKey }

// TransactionTimeout is the transaction timeout the Producer asks for
// (InitProducerId transaction_timeout_ms; at most the broker's
// transaction.max.timeout.ms, 15 min by default): a transaction left open
// by a publisher that died is aborted by the coordinator after it, unless
// a newer publisher's InitProducerId aborts it first (at its start).
const TransactionTimeout = time.Minute

// ErrFenced matches every *FencedError.
var ErrFenced = errors.New("sink: producer fenced")

// FencedError reports that another publisher took over the transactional
// id (its InitProducerId fenced this one's epoch: PRODUCER_FENCED,
// INVALID_PRODUCER_EPOCH) or that the id may not be used
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Fatal: this publisher must
// stop; the newer one goes on. It matches ErrFenced; IsFatal reports it.
type FencedError struct {
	TransactionalID string
	Op              string // the request refused: InitProducerId, AddPartitionsToTxn, Produce, EndTxn
	Err             error  // the broker's error (a kafka.Error)
}

func (e *FencedError) Error() string {
	if errors.Is(e.Err, kafka.TransactionalIDAuthorizationFailed) {
		return fmt.Sprintf("sink: transactional id %q refused (%s: %v): grant WRITE and DESCRIBE on TransactionalId %q, or set kafka.transactional-id",
			e.TransactionalID, e.Op, e.Err, e.TransactionalID)
	}
	return fmt.Sprintf("sink: producer fenced: another publisher took over transactional id %q (%s: %v); this one stops, the newer one goes on",
		e.TransactionalID, e.Op, e.Err)
}

// Is makes a *FencedError match ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

func (e *FencedError) Unwrap() error { return e.Err }

// errTxnAborted marks the records of a round whose batches were
// acknowledged but whose transaction was aborted because another batch of
// it failed: not visible to a read_committed consumer, to be sent again.
var errTxnAborted = errors.New("acknowledged, but its transaction was aborted (another batch failed)")

// txnState is the transactional side of a Producer (exactly-once
// delivery): the transactional id, the connection to its transaction
// coordinator and the partitions added to the open transaction.
type txnState struct {
	id    string
	coord *brokerConn
	added map[tp]bool // partitions added to the open transaction
	open  bool        // AddPartitionsToTxn succeeded since the last EndTxn
	began time.Time   // when the open transaction's first AddPartitionsToTxn succeeded
}

// txnTransport is what transactions need of the cluster beyond transport
// (*cluster implements it).
type txnTransport interface {
	metaRoundTrip(ctx context.Context, msg protocol.Message) (protocol.Message, error)
	dialAddr(ctx context.Context, addr string) (*brokerConn, error)
}

func (c *cluster) dialAddr(ctx context.Context, addr string) (*brokerConn, error) {
	return dialBroker(ctx, addr, c.dialTimeout, c.sec)
}

// Transactional returns c for the publisher's Writer: with exactly-once
// delivery, its producer is transactional under TransactionalID, or
// DefaultTransactionalID(checkpointKey) when that is "". Other producers
// of the same configuration (the checkpoint mirror, replay, dead-letter
// republish) stay at-least-once: they never use, and so never fence, the
// publisher's transactional id.
func (c Config) Transactional(checkpointKey string) Config {
	if c.ExactlyOnce() {
		c.txnID = c.TransactionalID
		if c.txnID == "" {
			c.txnID = DefaultTransactionalID(checkpointKey)
		}
	}
	return c
}

// TxnID returns the transactional id Transactional set, "" for none.
func (c *Config) TxnID() string { return c.txnID }

// newTxnState returns the transactional state for cfg, nil unless
// Transactional made it exactly-once (and idempotent).
func newTxnState(cfg Config) *txnState {
	if !cfg.ExactlyOnce() || !cfg.Idempotent || cfg.txnID == "" {
		return nil
	}
	return &txnState{id: cfg.txnID, added: map[tp]bool{}}
}

// txnID returns the transactional id for produce requests ("" without).
func (c *Producer) txnID() string {
	if c.txn == nil {
		return ""
	}
	return c.txn.id
}

// writeTxn is WriteMessages in exactly-once mode: the round is one
// transaction (AddPartitionsToTxn, the batches, EndTxn commit), committed
// before it returns nil. When a batch fails, or the commit is refused, the
// transaction is aborted (EndTxn abort; the producer's epoch is bumped by
// a new InitProducerId) and the round is produced again in a new one, up
// to txnRedos times; then a kafka.WriteErrors with one entry per record
// (errTxnAborted for the acknowledged ones) or the cause. A *FencedError
// returns at once.
func (c *Producer) writeTxn(ctx context.Context, msgs []kafka.Message) error {
	if c.txn.open || len(c.inflight) > 0 {
		// It would commit the open transaction's other rounds with it,
		// before their owner acknowledged them (Commit, Writer.commit).
		return errors.New("sink: WriteMessages while a transaction is open (commit it first)")
	}
	for attempt := 1; ; attempt++ {
		err := c.txnRound(ctx, msgs)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrFenced) {
			c.txnForget()
			return err
		}
		if aerr := c.txnAbort(ctx); errors.Is(aerr, ErrFenced) {
			return aerr
		} else if aerr != nil {
			// The coordinator aborts it when the next InitProducerId
			// bumps the epoch (or after TransactionTimeout).
			c.log.Warn("abort of the transaction failed; the next producer epoch aborts it", zap.String("transactional_id", c.txn.id), zap.Error(aerr))
		}
		var werrs kafka.WriteErrors
		redo := !(errors.As(err, &werrs) && allTooLarge(werrs)) && !IsFatal(err)
		if !redo || attempt >= txnRedos || ctx.Err() != nil {
			return abortedErrors(err, len(msgs))
		}
		c.backoff(ctx, attempt, true, "transaction aborted; producing the round again in a new transaction",
			zap.String("transactional_id", c.txn.id), zap.Int("records", len(msgs)), zap.Error(first(err)))
	}
}

// txnRedos is how often a round is produced in a new transaction after
// its transaction was aborted (each with the Producer's own MaxAttempts
// retries of each batch).
const txnRedos = 3

// allTooLarge reports whether every failure of werrs is MESSAGE_TOO_LARGE
// (no redo: the Writer resends the records one at a time).
func allTooLarge(werrs kafka.WriteErrors) bool {
	n := 0
	for _, e := range werrs {
		if e == nil {
			continue
		}
		if !errors.Is(e, kafka.MessageSizeTooLarge) {
			return false
		}
		n++
	}
	return n > 0
}

// abortedErrors is a failed round's error once its transaction was
// aborted: the records acknowledged in it fail with errTxnAborted.
func abortedErrors(err error, n int) error {
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) || len(werrs) != n {
		return err
	}
	out := make(kafka.WriteErrors, n)
	for i, e := range werrs {
		out[i] = e
		if e == nil {
			out[i] = errTxnAborted
		}
	}
	return out
}

// txnRound produces msgs in one transaction and commits it.
func (c *Producer) txnRound(ctx context.Context, msgs []kafka.Message) error {
	r, err := c.Begin(ctx, msgs) // initID and txnAdd are called from Begin
	if err != nil {
		return err
	}
	if err := c.Wait(ctx, r); err != nil {
		return err
	}
	return c.txnEnd(ctx, true)
}

// txnInit gets the producer id and epoch of the transactional id from its
// coordinator (InitProducerId with transactional_id, KIP-98): the epoch
// is bumped, which fences every earlier producer of the id and aborts (or
// completes) its open transaction. Sequences start from 0 again.
func (c *Producer) txnInit(ctx context.Context) error {
	var pid int64
	var epoch int16
	err := c.txnCall(ctx, "InitProducerId", func(ctx context.Context) (int16, error) {
		res, err := c.txnRoundTrip(ctx, &initAPI.Request{TransactionalID: c.txn.id, TransactionTimeoutMs: int32(TransactionTimeout / time.Millisecond),
			ProducerID: -1, ProducerEpoch: -1})
		if err != nil {
			return 0, err
		}
		r := res.(*initAPI.Response)
		pid, epoch = r.ProducerID, r.ProducerEpoch
		return r.ErrorCode, nil
	})
	if err != nil {
		return err
	}
	c.pid, c.epoch, c.haveID = pid, epoch, true
	clear(c.seqs)
	c.broken = nil
	clear(c.txn.added)
	c.txn.open = false
	c.log.Debug("transactional producer id", zap.String("transactional_id", c.txn.id), zap.Int64("producer_id", pid), zap.Int16("producer_epoch", epoch))
	return nil
}

// txnAdd adds the partitions of round r not yet in the open transaction
// (AddPartitionsToTxn), before any of its batches is sent.
func (c *Producer) txnAdd(ctx context.Context, r *Round) error {
	req := &addAPI.Request{TransactionalID: c.txn.id, ProducerID: c.pid, ProducerEpoch: c.epoch}
	var added []tp
	for _, b := range r.batches {
		if c.txn.added[b.tp] {
			continue
		}
		added = append(added, b.tp)
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Name != b.topic {
			req.Topics = append(req.Topics, addAPI.RequestTopic{Name: b.topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, b.partition)
	}
	if len(added) == 0 {
		return nil
	}
	err := c.txnCall(ctx, "AddPartitionsToTxn", func(ctx context.Context) (int16, error) {
		res, err := c.txnRoundTrip(ctx, req)
		if err != nil {
			return 0, err
		}
		// The first error that is not OPERATION_NOT_ATTEMPTED (55: the
		// others of a refused request).
		var code int16
		for _, t := range res.(*addAPI.Response).Results {
			for _, p := range t.Results {
				if p.ErrorCode != 0 && (code == 0 || code == 55) {
					code = p.ErrorCode
				}
			}
		}
		return code, nil
	})
	if err != nil {
		return err
	}
	for _, k := range added {
		c.txn.added[k] = true
	}
	if !c.txn.open {
		c.txn.open, c.txn.began = true, time.Now()
	}
	return nil
}

// TxnOpen reports whether a transaction is open (exactly-once: a round
// was begun since the last commit or abort) and since when (its first
// AddPartitionsToTxn). false without exactly-once.
func (c *Producer) TxnOpen() (time.Time, bool) {
	if c.txn == nil || !c.txn.open {
		return time.Time{}, false
	}
	return c.txn.began, true
}

// Commit commits the open transaction (EndTxn commit, KIP-98): every
// round begun since the last commit becomes visible to read_committed
// consumers at once. Every round of it must have been waited (Wait) and
// acknowledged; nil at once when none is open (or without exactly-once).
// On a *FencedError the producer id is dropped. Another error leaves the
// transaction's outcome to the caller: a definite refusal (see
// CommitRefused) means it was not committed: Abort it and produce its
// rounds again; any other error means it may have been, and only a
// restart's start decision (SettleTransactions, CommittedHeads) can tell.
func (c *Producer) Commit(ctx context.Context) error {
	if c.txn == nil || !c.txn.open {
		return nil
	}
	if len(c.inflight) > 0 {
		return fmt.Errorf("sink: commit with %d rounds in flight", len(c.inflight))
	}
	err := c.txnEnd(ctx, true)
	if errors.Is(err, ErrFenced) {
		c.txnForget()
	}
	return err
}

// CommitRefused reports whether a Commit error is the coordinator's
// definite refusal (an error code that no retry changes, such as
// INVALID_TXN_STATE: the transaction was not committed) rather than an
// unknown outcome: no answer, or retriable answers until the attempts ran
// out (CONCURRENT_TRANSACTIONS is also the answer to a commit request
// sent again while the coordinator completes the first one, whose answer
// was lost; NOT_COORDINATOR after a lost answer, likewise).
func CommitRefused(err error) bool {
	var ke kafka.Error
	return errors.As(err, &ke) && classifyTxn(ke) == txnAbortable
}

// Abort aborts the open transaction (EndTxn abort) after one of its rounds
// failed, and drops the producer id: the next round's InitProducerId bumps
// the epoch (refusing any batch of the aborted transaction still on its
// way) and numbers from 0, so the Producer is no longer broken. Every
// round begun must have been waited. A failed EndTxn is logged: the next
// epoch aborts the transaction anyway; a *FencedError returns.
func (c *Producer) Abort(ctx context.Context) error {
	if c.txn == nil {
		return nil
	}
	if err := c.txnAbort(ctx); errors.Is(err, ErrFenced) {
		return err
	} else if err != nil {
		c.log.Warn("abort of the transaction failed; the next producer epoch aborts it", zap.String("transactional_id", c.txn.id), zap.Error(err))
	}
	return nil
}

// txnEnd ends the open transaction (EndTxn): commit, or abort.
func (c *Producer) txnEnd(ctx context.Context, commit bool) error {
	if !c.txn.open {
		return nil
	}
	op := "EndTxn(abort)"
	if commit {
		op = "EndTxn(commit)"
	}
	err := c.txnCall(ctx, op, func(ctx context.Context) (int16, error) {
		res, err := c.txnRoundTrip(ctx, &endAPI.Request{TransactionalID: c.txn.id, ProducerID: c.pid, ProducerEpoch: c.epoch, Committed: commit})
		if err != nil {
			return 0, err
		}
		return res.(*endAPI.Response).ErrorCode, nil
	})
	if err != nil {
		return err
	}
	clear(c.txn.added)
	c.txn.open = false
	if c.obs != nil {
		c.obs.Transacted(commit)
	}
	return nil
}

// txnAbort aborts the open transaction after a failure and forgets the
// producer id: the next round's InitProducerId bumps the epoch, so that a
// batch of the aborted transaction still on its way is refused, and
// numbers from 0.
func (c *Producer) txnAbort(ctx context.Context) error {
	err := c.txnEnd(ctx, false)
	c.txnForget()
	c.broken = nil // the new epoch orders everything after it
	return err
}

// txnForget drops the producer id and the open transaction's state.
func (c *Producer) txnForget() {
	c.haveID = false
	clear(c.txn.added)
	c.txn.open = false
}

// txnCall runs one coordinator request, retrying it (with a new
// coordinator lookup where the answer says so) as classifyTxn decides,
// up to MaxAttempts times with the produce backoff (CONCURRENT_TRANSACTIONS:
// concurrentDelay apart, up to concurrentTries times: the coordinator
// finishing the previous transaction's markers). A fence is a *FencedError.
func (c *Producer) txnCall(ctx context.Context, op string, f func(context.Context) (int16, error)) error {
	concurrent := 0
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
		code, err := f(rctx)
		cancel()
		if err == nil && code != 0 {
			err = kafka.Error(code)
		}
		switch classifyTxn(err) {
		case txnDone:
			return nil
		case txnFenced:
			return &FencedError{TransactionalID: c.txn.id, Op: op, Err: err}
		case txnAgain:
			if concurrent++; concurrent < concurrentTries && ctx.Err() == nil {
				// The previous transaction's markers are being written,
				// a few milliseconds on a healthy cluster: ask again
				// soon (2, 4, 8 ms, then every 10 ms; Java's producer
				// waits 20 ms, which capped the drain at one round per 20 ms).
				attempt--
				wait(ctx, concurrentDelay(concurrent))
				continue
			}
		case txnRelookup:
			c.txnDrop()
		case txnAbortable:
			return fmt.Errorf("%s: %w", op, err)
		}
		if attempt >= c.cfg.MaxAttempts || ctx.Err() != nil {
			return fmt.Errorf("%s (transactional id %s): %w", op, c.txn.id, err)
		}
		c.backoff(ctx, attempt, true, "transaction coordinator request failed; retrying", zap.String("request", op), zap.Error(err))
	}
}

func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// txnRoundTrip sends msg to the transaction coordinator of the
// transactional id (looked up with FindCoordinator, key type 1, once per
// connection).
func (c *Producer) txnRoundTrip(ctx context.Context, msg protocol.Message) (protocol.Message, error) {
	tt, ok := c.tr.(txnTransport)
	if !ok {
		return nil, errors.New("sink: exactly-once delivery needs a cluster transport")
	}
	if c.txn.coord == nil || !c.txn.coord.alive() {
		c.txnDrop()
		res, err := tt.metaRoundTrip(ctx, &findAPI.Request{Key: c.txn.id, KeyType: 1})
		if err != nil {
			return nil, fmt.Errorf("find the transaction coordinator: %w", err)
		}
		fr := res.(*findAPI.Response)
		if fr.ErrorCode != 0 {
			return nil, fmt.Errorf("find the transaction coordinator: %w", kafka.Error(fr.ErrorCode))
		}
		bc, err := tt.dialAddr(ctx, fr.Host+":"+strconv.Itoa(int(fr.Port)))
		if err != nil {
			return nil, fmt.Errorf("transaction coordinator %s:%d: %w", fr.Host, fr.Port, err)
		}
		c.txn.coord = bc
	}
	res, err := c.txn.coord.roundTrip(ctx, msg, c.cfg.WriteTimeout, withinWrite)
	if err != nil {
		c.txnDrop()
		return nil, fmt.Errorf("transaction coordinator %s: %w", c.txn.coord0(), err)
	}
	return res, nil
}

func (t *txnState) coord0() string {
	if t.coord == nil {
		return "(closed)"
	}
	return t.coord.addr
}

// txnDrop closes the coordinator connection: the next request looks the
// coordinator up again.
func (c *Producer) txnDrop() {
	if c.txn != nil && c.txn.coord != nil {
		c.txn.coord.close()
		c.txn.coord = nil
	}
}

// Transactional batches: attribute bit 4 (Kafka protocol guide, "Record
// Batch": isTransactional).
const batchTransactional = 0x10

// markTransactional sets the transactional attribute of a batch
// appendBatch encoded and updates its CRC.
func markTransactional(raw []byte) {
	b := raw[4:]
	a := binary.BigEndian.Uint16(b[batchAttrsAt:])
	binary.BigEndian.PutUint16(b[batchAttrsAt:], a|batchTransactional)
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttrsAt:], castagnoli))
}

// SettleTransactions fences every earlier producer of cfg's transactional
// id and waits until the coordinator finished its open transaction
// (committed when its commit was requested, else aborted): an
// InitProducerId on the coordinator. Afterwards the newest committed
// records (CommittedHeads) are final. Call it before reading them at
// start in exactly-once mode.
func SettleTransactions(ctx context.Context, cfg Config, log *zap.Logger) error {
	cl := newCluster(cfg.Brokers, cfg.DialTimeout, false, log)
	cl.sec = NewSecurity(cfg)
	p := newProducer(cfg, &kafka.Hash{}, log, cl)
	defer p.Close()
	return p.txnInit(ctx)
}

// closeTxn closes the coordinator connection (Close).
func (c *Producer) closeTxn() {
	c.txnDrop()
}

// clusterKeys are the protocol messages a brokerConn negotiates versions
// of beyond the producer's own (conn.go): transactions and the committed
// read.
var txnKeys = []protocol.ApiKey{protocol.FindCoordinator, protocol.AddPartitionsToTxn, protocol.EndTxn, protocol.Fetch, protocol.ListOffsets}

func negotiated(key protocol.ApiKey) bool { return slices.Contains(txnKeys, key) }
