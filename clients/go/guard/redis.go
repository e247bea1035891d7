package guard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
	"github.com/redis/go-redis/v9"
)

var fencedWrite = redis.NewScript(fencedWriteLua)

// ReservedKeyPrefix starts every key a Redis guard names itself; data keys may not start with
// "fencepost:" at all (which also keeps guards off the controller's token counters).
const ReservedKeyPrefix = "fencepost:guard:"

// DefaultLock is the lock name of a guard made without one.
const DefaultLock = "default"

// DefaultWriteIDTTL is how long applied write ids are remembered by default.
const DefaultWriteIDTTL = 24 * time.Hour

// Scope says what one mark covers.
type Scope string

const (
	// ScopeLock keeps one mark per lock for every key written through the guard (the default).
	ScopeLock Scope = "lock"
	// ScopeKey keeps one mark per data key: weaker — a stale holder can still write every key
	// the newer holder has not written, and re-create deleted ones.
	ScopeKey Scope = "key"
)

// RedisOptions configure a Redis guard; the zero value is one mark for lock "default".
type RedisOptions struct {
	// Lock names the lock whose tokens the guard checks (ScopeLock; default DefaultLock). Guards
	// sharing a name share one mark. In Redis Cluster, a hash tag ("{orders}") that the data
	// keys carry too.
	Lock string
	// Scope is ScopeLock (default) or ScopeKey.
	Scope Scope
	// WriteIDTTL is how long an applied write id is remembered (default DefaultWriteIDTTL).
	WriteIDTTL time.Duration
}

// Outcome is what a guard did with a write. Applied and NotFound raise the mark to the token;
// Duplicate and Stale change nothing.
type Outcome string

const (
	// Applied: the token was not below the mark; the write happened and the mark is the token.
	Applied Outcome = "applied"
	// Duplicate: the write id was already applied within the window; nothing changed.
	Duplicate Outcome = "duplicate"
	// Stale: the token was below the mark; nothing changed.
	Stale Outcome = "stale"
	// NotFound (SQL Update and Upsert): the token was accepted and the mark raised, but no row
	// has the id.
	NotFound Outcome = "not-found"
)

// RedisResult is the outcome of a fenced Redis call and the lock's mark after it.
type RedisResult struct {
	Outcome Outcome
	// Mark is the high-water mark after the call.
	Mark fencepost.Token
}

// Accepted reports whether the write was applied now or before (Duplicate).
func (r RedisResult) Accepted() bool { return r.Outcome != Stale }

// Redis performs fenced writes through a go-redis client.
type Redis struct {
	client redis.Cmdable
	scope  Scope
	lock   string
	ttl    time.Duration
}

// NewRedis returns a guard on client (a *redis.Client, ClusterClient or Ring). The script is
// sent with EVALSHA, and with EVAL after NOSCRIPT. Hazards: only writes through the guard are
// fenced; the mark must live on the same server (and Cluster slot) as the data and never expire.
func NewRedis(client redis.Cmdable, o RedisOptions) (*Redis, error) {
	g := &Redis{client: client, scope: o.Scope, lock: o.Lock, ttl: o.WriteIDTTL}
	if g.scope == "" {
		g.scope = ScopeLock
	}
	if g.ttl == 0 {
		g.ttl = DefaultWriteIDTTL
	}
	switch {
	case g.scope != ScopeLock && g.scope != ScopeKey:
		return nil, fmt.Errorf("guard: scope must be %q or %q, got %q", ScopeLock, ScopeKey, g.scope)
	case g.scope == ScopeKey && g.lock != "":
		return nil, errors.New("guard: Lock goes with ScopeLock")
	case g.ttl < time.Millisecond:
		return nil, fmt.Errorf("guard: WriteIDTTL must be at least 1ms, got %s", g.ttl)
	}
	if g.scope == ScopeLock && g.lock == "" {
		g.lock = DefaultLock
	}
	return g, nil
}

// MarkKey is the Redis key of the mark covering key (any key in ScopeLock).
func (g *Redis) MarkKey(key string) string {
	if g.scope == ScopeLock {
		return ReservedKeyPrefix + "lock:" + g.lock
	}
	return ReservedKeyPrefix + "key:" + key
}

func (g *Redis) writesKey(key string) string {
	if g.scope == ScopeLock {
		return ReservedKeyPrefix + "writes:lock:" + g.lock
	}
	return ReservedKeyPrefix + "writes:key:" + key
}

// Write sets key to value if token is not below the mark, and raises the mark to token;
// otherwise it changes nothing and reports Stale with the mark. An invalid token or a key in the
// reserved "fencepost:" namespace is refused before anything is sent.
func (g *Redis) Write(ctx context.Context, key string, token fencepost.Token, value string) (RedisResult, error) {
	return g.call(ctx, "set", key, token, value, "")
}

// WriteOnce is Write with a write id: an id already applied within WriteIDTTL is not applied
// again and is reported Duplicate (whatever its token) — retry a write whose answer was lost
// with the same id.
func (g *Redis) WriteOnce(ctx context.Context, key string, token fencepost.Token, value, writeID string) (RedisResult, error) {
	if writeID == "" {
		return RedisResult{}, errors.New("guard: writeID must not be empty")
	}
	return g.call(ctx, "set", key, token, value, writeID)
}

// Delete removes key under the same rule as Write (and raises the mark). With ScopeLock the mark
// outlives the key, so a stale holder cannot re-create it.
func (g *Redis) Delete(ctx context.Context, key string, token fencepost.Token) (RedisResult, error) {
	return g.call(ctx, "del", key, token, "", "")
}

// Advance raises the lock's mark to token without writing: call it at the start of a term to
// fence out every older token before the first write. ScopeLock only.
func (g *Redis) Advance(ctx context.Context, token fencepost.Token) (RedisResult, error) {
	if g.scope != ScopeLock {
		return RedisResult{}, errors.New("guard: Advance needs one mark per lock (ScopeLock)")
	}
	return g.call(ctx, "fence", "", token, "", "")
}

// HighWater reads the mark covering key (any key in ScopeLock); ok is false when nothing has
// been accepted yet.
func (g *Redis) HighWater(ctx context.Context, key string) (mark fencepost.Token, ok bool, err error) {
	v, err := g.client.Get(ctx, g.MarkKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	mark, err = fencepost.ParseToken(v)
	return mark, err == nil, err
}

func (g *Redis) call(ctx context.Context, op, key string, token fencepost.Token, value, writeID string) (RedisResult, error) {
	if !token.Valid() {
		return RedisResult{}, fmt.Errorf("guard: %w: %d exceeds the maximum %d", fencepost.ErrMalformedToken, uint64(token), uint64(fencepost.MaxToken))
	}
	data := key
	if op == "fence" {
		data = g.MarkKey("")
	} else if strings.HasPrefix(key, "fencepost:") {
		return RedisResult{}, fmt.Errorf("guard: data key %q is in the reserved fencepost: namespace", key)
	}
	keys := []string{data, g.MarkKey(key), g.writesKey(key)}
	args := []any{token.String(), value, writeID, strconv.FormatInt(g.ttl.Milliseconds(), 10), op}
	res, err := fencedWrite.Run(ctx, g.client, keys, args...).StringSlice()
	if err != nil {
		return RedisResult{}, fmt.Errorf("guard: fenced %s of %q: %w", op, data, err)
	}
	if len(res) != 2 {
		return RedisResult{}, fmt.Errorf("guard: fenced %s of %q: unexpected script result %q", op, data, res)
	}
	r := RedisResult{Outcome: Outcome(res[0])}
	switch r.Outcome {
	case Applied, Duplicate, Stale:
	default:
		return RedisResult{}, fmt.Errorf("guard: fenced %s of %q: unexpected outcome %q", op, data, res[0])
	}
	if res[1] != "" {
		if r.Mark, err = fencepost.ParseToken(res[1]); err != nil {
			return RedisResult{}, fmt.Errorf("guard: mark of %q: %w", data, err)
		}
	}
	return r, nil
}
