package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/lease"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"go.uber.org/zap"
)

// ErrPublisherRunning reports a publisher that seems to be running (an
// instance holds the source's lease, or a replica with source.server-id is
// registered) while "checkpoint set" would overwrite its checkpoint.
var ErrPublisherRunning = errors.New("a publisher seems to be running")

// SetResult is what SetCheckpoint did.
type SetResult struct {
	Key      string
	Old      *checkpoint.Checkpoint // nil: none, or Corrupt
	Corrupt  bool                   // the old value was corrupt (overwritten)
	New      *checkpoint.Checkpoint // as read back
	Warnings []string
}

// RefusedError is a SetCheckpoint refusal (the position, or a running
// publisher), as opposed to a connection failure: the operator's to fix.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// SetCheckpoint stores st, checked against the server like a start
// (the file on the server, the offset within it, at a transaction
// boundary; the GTID set filled in), with the current partition counts of
// the target topics, as the checkpoint: the next run resumes there.
// It refuses (a *RefusedError wrapping ErrPublisherRunning) while an
// instance holds the source's lease or a replica with source.server-id is
// registered, unless force; and a
// position the server does not have (a *RefusedError). Other errors are
// connection errors.
func SetCheckpoint(ctx context.Context, cfg config.Config, st binlog.Start, force bool, log *zap.Logger) (SetResult, error) {
	res := SetResult{Key: cfg.Checkpoint.Key}
	srv, err := binlog.Connect(ctx, cfg.Source, log.Named("source"))
	if err != nil {
		return res, err
	}
	defer srv.Close()
	store := checkpoint.NewStore(cfg.Checkpoint)
	defer store.Close()

	host, err := srv.ReplicaUsing(cfg.Source.ServerID)
	switch {
	case err != nil:
		res.Warnings = append(res.Warnings, fmt.Sprintf("cannot tell whether the publisher is running (%v); if it is, it overwrites this checkpoint at its next write", err))
	case host != "" && !force:
		return res, &RefusedError{fmt.Errorf("%w: a replica with source.server-id %d is registered on the server (host %s): the publisher would overwrite the checkpoint at its next write. "+
			"Stop it first (if it was killed, its registration goes away within seconds), or give --force", ErrPublisherRunning, cfg.Source.ServerID, host)}
	case host != "":
		res.Warnings = append(res.Warnings, fmt.Sprintf("--force: a replica with source.server-id %d is registered (host %s); a running publisher overwrites this checkpoint at its next write", cfg.Source.ServerID, host))
	}
	// Under ha, the running owner holds the source's lease (its server_id
	// is then one of a range, which the check above may not see).
	if holder, err := lease.Holder(ctx, store.Client(), cfg.Checkpoint.Key); err == nil && holder != "" {
		if !force {
			return res, &RefusedError{fmt.Errorf("%w: instance %q holds the lease of checkpoint %s: it is publishing and would overwrite the checkpoint at its next write. "+
				"Stop every instance first (a killed one's lease expires within ha.lease-ttl), or give --force", ErrPublisherRunning, holder, cfg.Checkpoint.Key)}
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("--force: instance %q holds the lease; it overwrites this checkpoint at its next write", holder))
	}
	pos, err := srv.Resolve(st)
	if err == nil {
		err = srv.CheckPosition(pos)
	}
	if errors.Is(err, binlog.ErrPositionUnavailable) || errors.Is(err, binlog.ErrStart) {
		return res, &RefusedError{err}
	}
	if err != nil {
		return res, err
	}
	if pos.GTIDSet == "" {
		// MariaDB tells the GTID set at a file:pos; a GTID-mode resume and
		// the tracked set then start right.
		if pos.GTIDSet, err = srv.GTIDSetAt(pos); err != nil {
			return res, err
		}
	}
	// One GTID per MariaDB domain (a raw @@gtid_binlog_state lists two).
	if pos.GTIDSet, err = binlog.NormalizeGTIDSet(srv.Flavor(), pos.GTIDSet); err != nil {
		return res, &RefusedError{err}
	}
	topics, err := RoutedTopics(ctx, cfg)
	if err != nil {
		return res, err
	}
	parts, err := PartitionCounts(ctx, cfg.Kafka, topics)
	if err != nil {
		return res, err
	}
	res.Old, err = store.Load(ctx)
	res.Corrupt = errors.Is(err, checkpoint.ErrCorrupt)
	if err != nil && !res.Corrupt {
		return res, err
	}
	w := checkpoint.NewWriter(store, checkpoint.Source{ServerID: srv.ServerID(), ServerUUID: srv.ServerUUID(), Flavor: srv.Flavor()}, parts)
	w.SetForce(true) // the operator's choice: backwards too
	if cfg.Checkpoint.MirrorTopic != "" {
		m := sink.NewMirror(cfg.Kafka, cfg.Checkpoint.MirrorTopic, log)
		defer m.Close()
		if _, err := m.Ensure(ctx); err != nil {
			return res, err
		}
		w.SetMirror(m, 0, func(err error) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%v: a lost Redis key would resume from the older copy", err))
		})
	}
	if _, err := applyIntents(ctx, w, log, []checkpoint.Intent{write("checkpoint set", binlog.Position{File: pos.File, Pos: pos.Pos, GTIDSet: pos.GTIDSet})}); err != nil {
		return res, err
	}
	res.New, err = store.Load(ctx)
	return res, err
}

// Stored is one source's checkpoint as Redis and the mirror hold it.
type Stored struct {
	Key string
	// Redis: the checkpoint in Redis (nil: none); RedisCorrupt: the
	// value there does not parse (ErrCorrupt), then Redis is nil.
	Redis        *checkpoint.Checkpoint
	RedisCorrupt error
	// MirrorTopic is checkpoint.mirror-topic ("" for none); Mirror the
	// copy there (nil: none); MirrorErr why it could not be read.
	MirrorTopic string
	Mirror      *checkpoint.Checkpoint
	MirrorErr   error
}

// Wins names the checkpoint run resumes from: "redis" (the primary
// store), else "mirror" (Redis lost the key), else "none".
func (s Stored) Wins() string {
	switch {
	case s.Redis != nil || s.RedisCorrupt != nil:
		return "redis"
	case s.Mirror != nil:
		return "mirror"
	}
	return "none"
}

// LoadStored reads the checkpoint from Redis and its copy from the
// mirror. Only Redis errors are returned (the mirror's are in MirrorErr).
func LoadStored(ctx context.Context, cfg config.Config, log *zap.Logger) (Stored, error) {
	s := Stored{Key: cfg.Checkpoint.Key, MirrorTopic: cfg.Checkpoint.MirrorTopic}
	store := checkpoint.NewStore(cfg.Checkpoint)
	defer store.Close()
	cp, err := store.Load(ctx)
	switch {
	case errors.Is(err, checkpoint.ErrCorrupt):
		s.RedisCorrupt = err
	case err != nil:
		return s, err
	}
	s.Redis = cp
	if s.MirrorTopic != "" {
		m := sink.NewMirror(cfg.Kafka, s.MirrorTopic, log)
		defer m.Close()
		b, found, err := m.Load(ctx, s.Key)
		switch {
		case err != nil:
			s.MirrorErr = err
		case found:
			s.Mirror, s.MirrorErr = checkpoint.Parse(s.Key, b)
		}
	}
	return s, nil
}

// DeleteStored deletes the checkpoint from Redis and writes a tombstone
// for its copy in the mirror, so that the next run starts from its start
// option: a "checkpoint reset" intent, applied like every other checkpoint
// write (applyIntents). It refuses (a *RefusedError wrapping
// ErrPublisherRunning and checkpoint.ErrHeld) while an instance holds the
// source's lease, unless force: checked in the same atomic step as the
// delete. It reports whether the Redis key existed.
func DeleteStored(ctx context.Context, cfg config.Config, force bool, log *zap.Logger) (bool, error) {
	store := checkpoint.NewStore(cfg.Checkpoint)
	defer store.Close()
	w := checkpoint.NewWriter(store, checkpoint.Source{}, nil)
	w.SetForce(force)
	if cfg.Checkpoint.MirrorTopic != "" {
		m := sink.NewMirror(cfg.Kafka, cfg.Checkpoint.MirrorTopic, log)
		defer m.Close()
		w.SetMirror(m, 0, nil)
	}
	done, err := applyIntents(ctx, w, log, []checkpoint.Intent{{Why: "checkpoint reset", Delete: true}})
	switch {
	case errors.Is(err, checkpoint.ErrHeld):
		return false, &RefusedError{fmt.Errorf("%w: %w", ErrPublisherRunning, err)}
	case errors.Is(err, checkpoint.ErrTombstone):
		return true, fmt.Errorf("%w (mirror topic %s): the next run would resume from the copy; run reset again once Kafka is reachable", err, cfg.Checkpoint.MirrorTopic)
	case err != nil:
		return false, err
	}
	return done[0].Existed, nil
}
