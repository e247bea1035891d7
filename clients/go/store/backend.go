package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
	"github.com/redis/go-redis/v9"
)

// attempt is one try for the lock: granted (with its token and when its request was sent), or
// refused (held by another owner, with its key's time left when Redis said).
type attempt struct {
	granted        bool
	token          fencepost.Token
	sent           time.Time
	counterMissing bool
	clockFloored   bool

	held        bool
	heldFor     time.Duration
	haveHeldFor bool
	reason      string
}

// backend is one lock in one store (src/stores/store.ts LockBackend): the I/O, no timers.
type backend interface {
	// tryAcquire takes the lock for owner with a TTL, issuing a token above floor with the grant.
	tryAcquire(ctx context.Context, owner string, ttl time.Duration, floor fencepost.Token) (attempt, error)
	// renew is a compare-and-PEXPIRE: false when the key is not owner's any more; an error when
	// there was no (sufficient) answer.
	renew(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	// release is a compare-and-DEL that publishes on the lock's channel.
	release(ctx context.Context, owner string) error
	// subscribe listens for releases of the lock; onRelease gets the released owner id.
	subscribe(onRelease func(owner string)) subscription
}

// newClient makes a go-redis client for t, with options chosen for a lock, where a late answer is
// worth less than none: no retries (a retried acquire could arrive after its validity, or twice)
// and one dial per connection attempt (go-redis dials 5 times by default),
// a dial and command timeout of CommandTimeout, and context deadlines honoured (Redlock's 500 ms
// per master).
func newClient(t Target) redis.UniversalClient {
	addrs := make([]string, len(t.Endpoints))
	for i, e := range t.Endpoints {
		addrs[i] = e.String()
	}
	switch t.Mode {
	case Sentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: t.Master, SentinelAddrs: addrs, Username: t.Username, Password: t.Password, DB: t.DB,
			DialTimeout: CommandTimeout, ReadTimeout: CommandTimeout, WriteTimeout: CommandTimeout,
			MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true, DisableIdentity: true,
		})
	case Cluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, Username: t.Username, Password: t.Password,
			DialTimeout: CommandTimeout, ReadTimeout: CommandTimeout, WriteTimeout: CommandTimeout,
			MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true, DisableIdentity: true,
		})
	}
	o := &redis.Options{
		Addr: addrs[0], Username: t.Username, Password: t.Password, DB: t.DB,
		DialTimeout: CommandTimeout, ReadTimeout: CommandTimeout, WriteTimeout: CommandTimeout,
		MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true, DisableIdentity: true,
	}
	if t.TLS {
		o.TLSConfig = &tls.Config{ServerName: t.Endpoints[0].Host, MinVersion: tls.VersionTLS12}
	}
	return redis.NewClient(o)
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// asInt reads an integer element of a script's answer.
func asInt(v any) (int64, bool) {
	n, ok := v.(int64)
	return n, ok
}

// redisBackend is one lock on one Redis deployment (src/stores/redis/backend.ts).
type redisBackend struct {
	client    redis.UniversalClient
	channels  *releaseChannels
	failovers *sentinelFailovers // Sentinel only: the acquire script's ARGV[4]
	keys      Keys
	display   string
}

func (b *redisBackend) tryAcquire(ctx context.Context, owner string, ttl time.Duration, floor fencepost.Token) (attempt, error) {
	// Before the request: the key's TTL starts no earlier than this.
	sent := time.Now()
	keys := []string{b.keys.Holder, b.keys.Counter, b.keys.Epoch}
	args := []any{owner, ms(ttl), floor.String()}
	if b.failovers != nil {
		f, err := b.failovers.current(ctx)
		if err != nil {
			return attempt{}, fmt.Errorf("%s: acquire: %w", b.display, err)
		}
		args = append(args, f)
	}
	reply, err := acquireScript.Run(ctx, b.client, keys, args...).Slice()
	if err != nil {
		return attempt{}, fmt.Errorf("%s: acquire: %w", b.display, err)
	}
	if len(reply) < 2 {
		return attempt{}, fmt.Errorf("%s: unexpected reply to the acquire script: %v", b.display, reply)
	}
	if g, _ := asInt(reply[0]); g != 1 {
		a := attempt{held: true, reason: "held by another owner in " + b.display}
		if pttl, ok := asInt(reply[1]); ok && pttl >= 0 {
			a.heldFor, a.haveHeldFor = time.Duration(pttl)*time.Millisecond, true
		}
		return a, nil
	}
	s, _ := reply[1].(string)
	token, err := fencepost.ParseToken(s)
	if err != nil {
		return attempt{}, fmt.Errorf("%s: token from Redis key %s: %w", b.display, b.keys.Counter, err)
	}
	if token <= floor {
		return attempt{}, fmt.Errorf("%s: Redis issued token %s not above floor %s for %s", b.display, token, floor, b.keys.Counter)
	}
	// {1, token, refloored, hadTtl, existed, epochChanged} (store-acquire.lua).
	existed, epochChanged := int64(0), int64(0)
	if len(reply) >= 6 {
		existed, _ = asInt(reply[4])
		epochChanged, _ = asInt(reply[5])
	}
	return attempt{granted: true, token: token, sent: sent, counterMissing: existed != 1, clockFloored: epochChanged == 1}, nil
}

func (b *redisBackend) renew(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	n, err := renewScript.Run(ctx, b.client, []string{b.keys.Holder}, owner, ms(ttl)).Int64()
	if err != nil {
		return false, fmt.Errorf("%s: renew: %w", b.display, err)
	}
	return n == 1, nil
}

func (b *redisBackend) release(ctx context.Context, owner string) error {
	if err := releaseScript.Run(ctx, b.client, []string{b.keys.Holder}, owner, b.keys.Channel).Err(); err != nil {
		return fmt.Errorf("%s: release: %w", b.display, err)
	}
	return nil
}

func (b *redisBackend) subscribe(onRelease func(owner string)) subscription {
	return b.channels.listen(b.keys.Channel, onRelease)
}
