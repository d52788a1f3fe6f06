package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// NewOwner returns a new instance id: the host name and 8 random bytes
// (hex), unique per process start, so that a restarted instance never
// passes for its predecessor.
func NewOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	if host == "" {
		host = "instance"
	}
	return host + "-" + hex.EncodeToString(b)
}

// acquireScript: KEYS lease, fence, checkpoint, term; ARGV owner, ttl
// ms, prev (the id of this instance's dead previous process, or ""),
// force ("1": take a free lease whatever its last term). A lease held by
// owner itself (an earlier acquisition whose answer the client gave up
// on, executed by Redis later; or a lost term of this process, which has
// stopped) or by prev is taken as if free, with a new token. A free lease
// whose last term (KEYS[4]) was not released and is neither owner's nor
// prev's is not taken without force: its key may have vanished (a Redis
// failover that lost it) while that owner still publishes (Acquirer
// decides). Replies {1, token}, {0, holder, pttl ms} or {2, last term}.
var acquireScript = redis.NewScript(`
local holder = redis.call('GET', KEYS[1])
if holder then
  local h = string.match(holder, '^(%S+) ')
  if h ~= ARGV[1] and (ARGV[3] == '' or h ~= ARGV[3]) then return {0, holder, redis.call('PTTL', KEYS[1])} end
elseif ARGV[4] ~= '1' then
  local last = redis.call('GET', KEYS[4])
  if last and not string.find(last, ' released$') then
    local lo = string.match(last, '^(%S+) ')
    if lo ~= ARGV[1] and (ARGV[3] == '' or lo ~= ARGV[3]) then return {2, last} end
  end
end
local token = redis.call('INCR', KEYS[2])
local cp = redis.call('GET', KEYS[3])
if cp then
  local ok, c = pcall(cjson.decode, cp)
  if ok and type(c) == 'table' and tonumber(c.token) and tonumber(c.token) >= token then
    token = tonumber(c.token) + 1
    redis.call('SET', KEYS[2], token)
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. token, 'PX', ARGV[2])
redis.call('SET', KEYS[4], ARGV[1] .. ' ' .. token)
return {1, tostring(token)}
`)

// observeScript: KEYS lease. Replies {holder, pttl ms} or {} when free.
var observeScript = redis.NewScript(`
local holder = redis.call('GET', KEYS[1])
if not holder then return {} end
return {holder, redis.call('PTTL', KEYS[1])}
`)

// renewScript: KEYS lease; ARGV holder, ttl ms. 1 renewed, 0 not ours.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// releaseScript: KEYS lease, term; ARGV holder. 1 released (the term
// recorded as released), 0 not ours.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1] .. ' released')
  return 1
end
return 0
`)

// Lease is one ownership term of a source; it implements pipeline.Fence.
type Lease struct {
	key   string // checkpoint key
	owner string
	token uint64
	lost  chan struct{}
	once  sync.Once
	why   error
	mu    sync.Mutex
}

// Token returns the fencing token of the term.
func (l *Lease) Token() uint64 { return l.token }

// Owner returns the instance id.
func (l *Lease) Owner() string { return l.owner }

// Key returns the source's checkpoint key.
func (l *Lease) Key() string { return l.key }

// Lost is closed once the lease is lost (Keeper).
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err says why the lease was lost (nil while held).
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.why
}

// Fence is the checkpoint fence of the term.
func (l *Lease) Fence() checkpoint.Fence {
	return checkpoint.Fence{LeaseKey: checkpoint.LeaseKey(l.key), Owner: l.owner, Token: l.token}
}

func (l *Lease) lose(why error) {
	l.once.Do(func() {
		l.mu.Lock()
		l.why = why
		l.mu.Unlock()
		close(l.lost)
	})
}

// ErrLost is why a lease was lost: wrapped with the reason.
var ErrLost = errors.New("lease lost")

// Acquire takes the lease of the source with checkpoint key key for
// owner, for ttl; it returns nil and the current holder ("<owner>
// <token>") when another instance holds it. sent is when the request was
// sent (the Keeper's first deadline counts from it).
func Acquire(ctx context.Context, rdb redis.Scripter, key, owner string, ttl time.Duration) (l *Lease, holder string, sent time.Time, err error) {
	return AcquireFrom(ctx, rdb, key, owner, "", ttl)
}

// A lease held by owner itself is taken too (with a new token): an
// acquisition is called only while this process runs no term of the
// source, so such a holder is an earlier acquisition of this process
// whose answer was given up on (a timeout while Redis was paused or slow:
// Redis executes it later) or a term of it that already stopped; waiting
// for it to expire would leave the source without a publisher for a TTL.
//
// AcquireFrom is Acquire that also takes the lease when its holder is
// prev: the id of this instance's previous process, known dead because
// this process holds its instance file (ClaimInstance). The new term's
// token is greater, so anything the dead process left in flight is
// fenced as after an expiry; prev "" is Acquire.
func AcquireFrom(ctx context.Context, rdb redis.Scripter, key, owner, prev string, ttl time.Duration) (l *Lease, holder string, sent time.Time, err error) {
	r, err := acquire(ctx, rdb, key, owner, prev, ttl, true)
	return r.lease, r.holder, r.sent, err
}

// attempt is one acquisition's answer.
type attempt struct {
	lease  *Lease
	holder string        // the holder when another instance holds the lease
	pttl   time.Duration // its time to live in Redis, as answered
	last   string        // the unreleased last term of a free lease (not forced)
	sent   time.Time     // when the request was sent
	at     time.Time     // when the answer came
}

func acquire(ctx context.Context, rdb redis.Scripter, key, owner, prev string, ttl time.Duration, force bool) (attempt, error) {
	r := attempt{sent: time.Now()}
	f := "0"
	if force {
		f = "1"
	}
	res, err := acquireScript.Run(ctx, rdb, []string{checkpoint.LeaseKey(key), checkpoint.FenceKey(key), key, checkpoint.TermKey(key)}, owner, ttl.Milliseconds(), prev, f).Slice()
	r.at = time.Now()
	if err != nil {
		return r, wrap("acquire "+checkpoint.LeaseKey(key), err)
	}
	if len(res) < 2 {
		return r, fmt.Errorf("lease: acquire %s: unexpected reply %v", checkpoint.LeaseKey(key), res)
	}
	switch n, _ := res[0].(int64); n {
	case 0:
		r.holder, _ = res[1].(string)
		if len(res) > 2 {
			ms, _ := res[2].(int64)
			r.pttl = time.Duration(ms) * time.Millisecond
		}
		return r, nil
	case 2:
		r.last, _ = res[1].(string)
		return r, nil
	}
	s, _ := res[1].(string)
	token, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return r, fmt.Errorf("lease: acquire %s: token %q: %w", checkpoint.LeaseKey(key), s, err)
	}
	r.lease = &Lease{key: key, owner: owner, token: token, lost: make(chan struct{})}
	return r, nil
}

// Acquirer is a standby's repeated acquisition of one source's lease. It
// remembers when the last holder it saw would expire, so that a lease gone
// before that without a release (a Redis failover that lost the key, a
// deletion) is waited out until then: its owner renews within a renew
// interval, finds the key gone and stops, or reaches its deadline first,
// which is before that expiry; a standby that took the lease at once
// published beside it until then (issue 30 item 3: 0.35 s measured). A
// lease expired as seen (its owner dead or paused past its deadline), or
// released, is taken at once; an unreleased one never seen is waited out
// for one TTL from when it was first found free. Not safe for concurrent
// use.
type Acquirer struct {
	Key, Owner string
	// Prev: the id of this instance's dead previous process ("": none),
	// whose lease is taken at once.
	Prev string
	TTL  time.Duration

	seenToken uint64    // the last holder's token seen
	seenUntil time.Time // when it would expire, at the latest (local clock)
	free      time.Time // since when an unreleased term never seen is free
}

// Acquire tries once: the lease when taken; else nil and what holds the
// source up: "<owner> <token>" of another holder, or a description of the
// unreleased term being waited out.
func (a *Acquirer) Acquire(ctx context.Context, rdb redis.Scripter) (l *Lease, holder string, sent time.Time, err error) {
	r, err := acquire(ctx, rdb, a.Key, a.Owner, a.Prev, a.TTL, false)
	if err != nil || r.lease != nil {
		return r.lease, "", r.sent, err
	}
	if r.holder != "" {
		a.saw(r.holder, r.pttl, r.at)
		a.free = time.Time{}
		return nil, r.holder, r.sent, nil
	}
	_, token, _ := ParseHolder(r.last)
	if a.free.IsZero() {
		a.free = r.at
	}
	wait := VanishedWait(a.seenToken, a.seenUntil, token, a.free, a.TTL)
	if r.at.Before(wait) {
		return nil, fmt.Sprintf("%s (its lease vanished unreleased: waiting until %s, when it would have expired)", r.last, wait.Format(time.RFC3339Nano)), r.sent, nil
	}
	r, err = acquire(ctx, rdb, a.Key, a.Owner, a.Prev, a.TTL, true)
	if r.holder != "" {
		a.saw(r.holder, r.pttl, r.at)
	}
	if r.lease != nil {
		a.free = time.Time{}
	}
	return r.lease, r.holder, r.sent, err
}

// Observe reads the holder and its time to live without acquiring (a
// standby that holds its share of the sources), so that a later
// acquisition knows when it would expire.
func (a *Acquirer) Observe(ctx context.Context, rdb redis.Scripter) error {
	res, err := observeScript.Run(ctx, rdb, []string{checkpoint.LeaseKey(a.Key)}).Slice()
	at := time.Now()
	if err != nil {
		return wrap("observe "+checkpoint.LeaseKey(a.Key), err)
	}
	if len(res) == 2 {
		h, _ := res[0].(string)
		ms, _ := res[1].(int64)
		a.saw(h, time.Duration(ms)*time.Millisecond, at)
	}
	return nil
}

func (a *Acquirer) saw(holder string, pttl time.Duration, at time.Time) {
	if _, token, ok := ParseHolder(holder); ok && pttl > 0 {
		a.seenToken, a.seenUntil = token, at.Add(pttl)
	}
}

// Release gives the lease up if it is still l's (after the publisher
// stopped and wrote its final checkpoint): a standby then takes over at
// once instead of after the TTL.
func Release(ctx context.Context, rdb redis.Scripter, l *Lease) (bool, error) {
	n, err := releaseScript.Run(ctx, rdb, []string{checkpoint.LeaseKey(l.key), checkpoint.TermKey(l.key)}, l.Fence().Holder()).Int()
	if err != nil {
		return false, wrap("release "+checkpoint.LeaseKey(l.key), err)
	}
	return n == 1, nil
}

// Keep renews l every cfg.RenewEvery() until ctx is cancelled or l is
// lost, and loses it (closing Lost) when a renewal is refused or when
// Deadline passed since the last renewal that succeeded was sent. sent is
// when the acquisition was sent. Each renewal is bounded by the time left
// to the deadline. Keep returns when ctx is cancelled or l is lost; it
// logs the loss (an Error: the source stops publishing).
func Keep(ctx context.Context, rdb redis.Scripter, l *Lease, sent time.Time, cfg Config, log *zap.Logger) {
	ttl, margin := cfg.TTL, cfg.StopMargin()
	deadline := Deadline(sent, ttl, margin)
	stop := time.NewTimer(time.Until(deadline))
	defer stop.Stop()
	tick := time.NewTicker(cfg.RenewEvery())
	defer tick.Stop()
	holder := l.Fence().Holder()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.lost:
			return
		case <-stop.C:
			err := fmt.Errorf("%w: not renewed within %s (lease-ttl %s − margin %s) of the last renewal: Redis unreachable or this process was paused",
				ErrLost, ttl-margin, ttl, margin)
			log.Error("lease lost: stopping the source's publishing", zap.String("key", l.key), zap.Uint64("token", l.token), zap.Error(err))
			l.lose(err)
			return
		case <-tick.C:
			at := time.Now()
			rctx, cancel := context.WithDeadline(ctx, Deadline(sent, ttl, margin))
			n, err := renewScript.Run(rctx, rdb, []string{checkpoint.LeaseKey(l.key)}, holder, ttl.Milliseconds()).Int()
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				failures++
				if failures == 1 {
					log.Warn("cannot renew the lease; retrying until it would expire", zap.String("key", l.key), zap.Uint64("token", l.token),
						zap.Error(err), zap.Time("stop_at", Deadline(sent, ttl, margin)))
				}
			case n != 1:
				err := fmt.Errorf("%w: the lease key %s no longer holds %q (expired, or taken over)", ErrLost, checkpoint.LeaseKey(l.key), holder)
				log.Error("lease lost: stopping the source's publishing", zap.String("key", l.key), zap.Uint64("token", l.token), zap.Error(err))
				l.lose(err)
				return
			default:
				failures = 0
				sent = at
				stop.Reset(time.Until(Deadline(sent, ttl, margin)))
			}
		}
	}
}

// Holder reads the current holder of key's lease ("" when free).
func Holder(ctx context.Context, rdb redis.Cmdable, key string) (string, error) {
	h, err := rdb.Get(ctx, checkpoint.LeaseKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return h, err
}

// ParseHolder splits a holder as Holder returns it ("<owner> <token>");
// ok is false for anything else.
func ParseHolder(h string) (owner string, token uint64, ok bool) {
	i := strings.LastIndexByte(h, ' ')
	if i <= 0 {
		return "", 0, false
	}
	token, err := strconv.ParseUint(h[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return h[:i], token, true
}

// LastToken reads the last fencing token issued for key's lease (the
// fence counter: the token of the latest term, whether or not it is still
// held); 0 when none was ever issued.
func LastToken(ctx context.Context, rdb redis.Cmdable, key string) (uint64, error) {
	n, err := rdb.Get(ctx, checkpoint.FenceKey(key)).Uint64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("lease: read %s: %w", checkpoint.FenceKey(key), err)
	}
	return n, nil
}

// heartbeatScript: KEYS group; ARGV owner, ttl ms. Marks owner alive
// until Redis time + ttl, drops the expired, returns how many are alive.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 10)
return redis.call('ZCARD', KEYS[1])
`)

// Heartbeat marks owner alive in group for ttl and returns how many
// instances are alive (this one included).
func Heartbeat(ctx context.Context, rdb redis.Scripter, group, owner string, ttl time.Duration) (int, error) {
	n, err := heartbeatScript.Run(ctx, rdb, []string{group}, owner, ttl.Milliseconds()).Int()
	if err != nil {
		return 0, wrap("heartbeat "+group, err)
	}
	return n, nil
}

// Leave removes owner from group (at a clean shutdown).
func Leave(ctx context.Context, rdb redis.Cmdable, group, owner string) error {
	return rdb.ZRem(ctx, group, owner).Err()
}

// wrap wraps a Redis error of op; an authentication error (WRONGPASS,
// NOAUTH) or an ACL refusal (NOPERM) also wraps checkpoint.ErrAuth
// (fatal), naming the settings or the ACL rules.
func wrap(op string, err error) error {
	if redis.IsAuthError(err) {
		return fmt.Errorf("%w: lease: %s: %w: check checkpoint.username and checkpoint.password (CDC_OUTBOX_CHECKPOINT_USERNAME, CDC_OUTBOX_CHECKPOINT_PASSWORD)", checkpoint.ErrAuth, op, err)
	}
	if redis.IsPermissionError(err) {
		return fmt.Errorf("%w: lease: %s: %w: the ACL user needs the checkpoint's keys and commands: ACL SETUSER <user> %s (docs/security.md)",
			checkpoint.ErrAuth, op, err, checkpoint.ACLRules("<checkpoint.key>", "<ha.group>"))
	}
	return fmt.Errorf("lease: %s: %w", op, err)
}
