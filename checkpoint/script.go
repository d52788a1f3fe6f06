package checkpoint

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Fence is the lease a checkpoint write is accepted under (package ha
// acquires it): the write succeeds only while the lease key holds exactly
// Holder(), checked in the same atomic step as the monotonic check.
type Fence struct {
	// LeaseKey is the source's lease key (LeaseKey(checkpoint key)).
	LeaseKey string
	// Owner is the instance's id (random per process), Token the fencing
	// token of this ownership term (INCR of FenceKey: only grows).
	Owner string
	Token uint64
}

// Holder is the lease key's value while f is the current lease:
// "<owner> <token>".
func (f Fence) Holder() string { return f.Owner + " " + strconv.FormatUint(f.Token, 10) }

// LeaseKey returns the lease key of the source whose checkpoint key is
// key: SlotKey(key, "lease"), "{key}:lease" for a key without braces (the
// hash of such a key is the hash of all of it) and key+":lease" for a key
// with a hash tag, so that it is in key's Redis Cluster slot and one
// script can touch both.
func LeaseKey(key string) string { return SlotKey(key, "lease") }

// FenceKey returns the fencing token counter of the source whose
// checkpoint key is key: SlotKey(key, "fence") (INCR at each acquisition,
// no TTL), in key's slot like LeaseKey.
func FenceKey(key string) string { return SlotKey(key, "fence") }

// TermKey returns the record of the last lease term of the source whose
// checkpoint key is key: SlotKey(key, "term"), "<owner> <token>", with
// " released" appended once the term gave the lease up (package lease: a
// lease gone without a release may still have a publishing owner).
func TermKey(key string) string { return SlotKey(key, "term") }

// WriteOptions say how Store.Save checks a write.
type WriteOptions struct {
	// Force: no monotonic check ("checkpoint set": the operator moves the
	// checkpoint anywhere on purpose).
	Force bool
	// Existed: the writer wrote or loaded the key before, so a missing key
	// is ErrVanished (written again).
	Existed bool
	// Fence, when set: the write is accepted only under this lease.
	Fence *Fence
}

// saveScript writes a checkpoint value in one atomic step:
//
//	KEYS[1] checkpoint key     KEYS[2] lease key (unused without a fence)
//	ARGV[1] value (JSON)       ARGV[2] "force" or "mono"
//	ARGV[3] "1": the writer wrote/loaded the key before
//	ARGV[4] lease holder expected ("" without a fence)
//	ARGV[5] server_id, ARGV[6] file, ARGV[7] pos of the value
//
// Replies {"ok"}, {"vanished"} (written), {"fenced", holder now} or
// {"backwards", stored file, stored pos} (both not written).
//
// Monotonic: only between two positions of the same source server (same
// server_id in the value, same file base name), file sequence numbers
// compared as numbers (.1000000 follows .999999), then offsets; equal is
// accepted (a rewrite with new partition counts). Not compared: a value
// without a file (GTID-only: comparing GTID sets is not done here; the
// fence alone guards those), values of different servers (a GTID failover
// moves to another server's files), and a stored value that does not
// decode (Load reports it as corrupt).
var saveScript = redis.NewScript(`
if ARGV[4] ~= '' then
  local holder = redis.call('GET', KEYS[2])
  if holder ~= ARGV[4] then
    return {'fenced', holder or ''}
  end
end
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1])
  if ARGV[3] == '1' then return {'vanished'} end
  return {'ok'}
end
if ARGV[2] == 'mono' and ARGV[6] ~= '' then
  local ok, c = pcall(cjson.decode, cur)
  if ok and type(c) == 'table' and type(c.file) == 'string' and c.file ~= '' and tostring(c.server_id) == ARGV[5] then
    local ob, on = string.match(c.file, '^(.*)%.(%d+)$')
    local nb, nn = string.match(ARGV[6], '^(.*)%.(%d+)$')
    if ob and nb and ob == nb then
      on, nn = tonumber(on), tonumber(nn)
      local op, np = tonumber(c.pos) or 0, tonumber(ARGV[7])
      if nn < on or (nn == on and np < op) then
        return {'backwards', c.file, tostring(op)}
      end
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1])
return {'ok'}
`)

// deleteScript deletes a checkpoint in one atomic step with the lease
// check:
//
//	KEYS[1] checkpoint key     KEYS[2] lease key
//	ARGV[1] "force", "fence" (ARGV[2] must hold the lease) or "free"
//	        (nobody may hold it)
//	ARGV[2] lease holder expected (with "fence")
//
// Replies {"deleted"}, {"none"} (no key), {"held", holder} or {"fenced",
// holder now} (both not deleted).
var deleteScript = redis.NewScript(`
if ARGV[1] ~= 'force' then
  local holder = redis.call('GET', KEYS[2])
  if ARGV[1] == 'fence' and holder ~= ARGV[2] then
    return {'fenced', holder or ''}
  end
  if ARGV[1] == 'free' and holder then
    return {'held', holder}
  end
end
if redis.call('DEL', KEYS[1]) == 1 then return {'deleted'} end
return {'none'}
`)
