package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
	"github.com/redis/go-redis/v9"
)

// ErrHeld is wrapped, together with fencepost.ErrNotAcquired, by the error of an Acquire with
// IfHeld fencepost.IfHeldFail that found the lock held by another owner.
var ErrHeld = errors.New("store: lock held by another owner")

// Options configure an acquire. The zero value waits until ctx is done for lock NAME in namespace
// "default" with a 15 s TTL.
type Options struct {
	// Namespace is the lock's namespace, a DNS label (default DefaultNamespace).
	Namespace string
	// TTL is the holder key's time to live, a whole number of ms in [MinTTL, MaxTTL]
	// (default DefaultTTL). The lock is trusted for TTL − Drift(TTL) after each renew was sent.
	TTL time.Duration
	// Wait bounds the wait for the grant; 0 waits until ctx is done.
	Wait time.Duration
	// IfHeld is fencepost.IfHeldWait (default) or fencepost.IfHeldFail: give up at the first
	// refusal by another owner (the error wraps ErrHeld and fencepost.ErrNotAcquired).
	IfHeld fencepost.IfHeld
	// Floor returns the lowest token a grant may be issued above (default 0), asked before every
	// attempt: the highest token the guarded resource has seen, say, so that tokens continue
	// above it when Redis lost the counter (docs/stores.md, "Tokens when Redis loses its data").
	Floor func(ctx context.Context, lock string) (fencepost.Token, error)
	// Pod is the Kubernetes pod this holder runs in, appended to its owner ids so that the
	// controller can show the holder (default: $POD_NAME and $POD_UID when both are set; outside
	// Kubernetes there is none). It adds no secrecy: the random part of the owner id carries that.
	Pod *Pod
}

// Pod names a Kubernetes pod.
type Pod struct {
	Name string
	UID  string
}

var (
	podName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	podUID  = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

// holderPod is o.Pod, else $POD_NAME and $POD_UID when both are set, else nil.
func holderPod(o Options) *Pod {
	if o.Pod != nil {
		return o.Pod
	}
	name, uid := os.Getenv("POD_NAME"), os.Getenv("POD_UID")
	if name == "" || uid == "" {
		return nil
	}
	return &Pod{Name: name, UID: uid}
}

// Store is an opened store URL: connections shared by every lock acquired through it. Its methods
// are safe for concurrent use.
type Store struct {
	url     URL
	clients []redis.UniversalClient
	masters []master

	closeOnce sync.Once
}

// openWait bounds how long Open waits for the first connections (a store down then is retried by
// the attempts).
const openWait = 2 * time.Second

// Open parses url (ParseURL; errors name it as "store URL") and connects, waiting at most 2 s
// (or until ctx is done) for the server — Redlock: a majority of masters — to answer a PING. A
// store that does not answer yet is not an error: the attempts retry. Close it when done; locks
// still held then are lost.
func Open(ctx context.Context, url string) (*Store, error) {
	u, err := ParseURL(url, "store URL")
	if err != nil {
		return nil, err
	}
	s := &Store{url: u}
	for _, t := range u.Targets {
		c := newClient(t)
		s.clients = append(s.clients, c)
		name := u.Display
		if u.Kind == KindRedlock {
			name = t.Endpoints[0].String()
		}
		m := master{name: name, client: c, channels: newReleaseChannels(c)}
		if t.Mode == Sentinel {
			m.failovers = newSentinelFailovers(t)
		}
		s.masters = append(s.masters, m)
	}
	pctx, cancel := context.WithTimeout(ctx, openWait)
	defer cancel()
	answered := make(chan struct{}, len(s.clients))
	for _, c := range s.clients {
		go func() {
			if c.Ping(pctx).Err() == nil {
				answered <- struct{}{}
			}
		}()
	}
	for need := Quorum(len(s.clients)); need > 0; need-- {
		select {
		case <-answered:
		case <-pctx.Done():
			return s, nil
		}
	}
	return s, nil
}

// Kind is KindRedis or KindRedlock.
func (s *Store) Kind() Kind { return s.url.Kind }

// Display is the store's URL with its password redacted.
func (s *Store) Display() string { return s.url.Display }

// Close closes the store's connections. Locks still held through it are lost (their watchdogs
// fail; they end at their validity).
func (s *Store) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		for _, m := range s.masters {
			m.channels.close()
			if m.failovers != nil {
				m.failovers.close()
			}
		}
		for _, c := range s.clients {
			errs = append(errs, c.Close())
		}
	})
	return errors.Join(errs...)
}

func (s *Store) backend(keys Keys) backend {
	if s.url.Kind == KindRedlock {
		return &redlockBackend{masters: s.masters, keys: keys, timeout: MasterTimeout}
	}
	m := s.masters[0]
	return &redisBackend{client: m.client, channels: m.channels, failovers: m.failovers, keys: keys, display: s.url.Display}
}

// Acquire opens url, acquires lock there (see Store.Acquire), and closes its connections when the
// lock is released. An app that takes locks again and again should Open the store once instead.
func Acquire(ctx context.Context, url, lock string, o Options) (*Lock, error) {
	start := time.Now()
	if _, err := checkOptions(lock, o); err != nil {
		return nil, err
	}
	s, err := Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if o.Wait > 0 { // Wait bounds the whole acquire, connecting included.
		o.Wait = max(o.Wait-time.Since(start), time.Nanosecond)
	}
	l, err := s.acquire(ctx, lock, o, func() { _ = s.Close() })
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return l, nil
}

// Acquire waits until lock is granted in the store, ctx is done or o.Wait has passed. It returns
// a held Lock — release it (defer lock.Release()) — or an error: one matching
// fencepost.ErrNotAcquired (not granted in time, ctx done, or held with IfHeldFail, then also
// ErrHeld), or a refused option. ctx bounds only the wait: the lock lives on until Release or
// loss (Lock.Context).
func (s *Store) Acquire(ctx context.Context, lock string, o Options) (*Lock, error) {
	return s.acquire(ctx, lock, o, nil)
}

type checked struct {
	keys Keys
	ttl  time.Duration
}

func checkOptions(lock string, o Options) (checked, error) {
	keys, err := LockKeys(o.Namespace, lock)
	if err != nil {
		return checked{}, err
	}
	ttl := o.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if err := checkTTL(ttl); err != nil {
		return checked{}, err
	}
	if o.IfHeld != "" && o.IfHeld != fencepost.IfHeldWait && o.IfHeld != fencepost.IfHeldFail {
		return checked{}, fmt.Errorf("store: IfHeld must be %q or %q, got %q", fencepost.IfHeldWait, fencepost.IfHeldFail, o.IfHeld)
	}
	if o.Wait < 0 {
		return checked{}, fmt.Errorf("store: Wait must not be negative, got %s", o.Wait)
	}
	return checked{keys: keys, ttl: ttl}, nil
}

// NewOwnerID is a fresh owner id (clients/conformance/store.json "ownerId"): 128 bits from the
// CSPRNG as lowercase hex, followed by "/<pod name>/<pod uid>" when pod is a valid pod reference.
// The owner id is what a renew and a release compare, so its random part is unguessable and never
// reused: a new one for every attempt.
func NewOwnerID(pod *Pod) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	id := hex.EncodeToString(b[:])
	if pod != nil && podName.MatchString(pod.Name) && podUID.MatchString(pod.UID) {
		return id + "/" + pod.Name + "/" + pod.UID
	}
	return id
}

// PodOfOwner reads the holder pod from an owner id; false when it names none (or not validly).
func PodOfOwner(owner string) (Pod, bool) {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 || parts[0] == "" || !podName.MatchString(parts[1]) || !podUID.MatchString(parts[2]) {
		return Pod{}, false
	}
	return Pod{Name: parts[1], UID: parts[2]}, true
}

// acquire is the waiter loop (src/stores/hold.ts holdLock; store.json "timing.waiting"). The
// first attempt goes out at once (a free lock costs one round trip); after the first refusal it
// subscribes to the release channel, waits (at most 250 ms) for the subscription, and tries again
// at once — a release between the refusal and the subscription is not missed — then retries on
// every release notified (not its own: see onRelease; Redlock: see redlockBackend.subscribe),
// else after a full-jitter backoff no longer than the holder's key has left. Failures to reach
// the store are retried the same way until the wait ends; the last reason is reported.
func (s *Store) acquire(ctx context.Context, lock string, o Options, done func()) (*Lock, error) {
	c, err := checkOptions(lock, o)
	if err != nil {
		return nil, err
	}
	b := s.backend(c.keys)
	var deadline time.Time
	if o.Wait > 0 {
		deadline = time.Now().Add(o.Wait)
	}
	// A release publishes the released owner id. The releases of this waiter's own failed
	// attempts (a Redlock attempt that took a minority gives it back) are not news: woken by them,
	// two waiters would retry at once, again and again, each taking and giving back the masters
	// the holder does not have — advancing their counters on every round.
	var ownMu sync.Mutex
	own := map[string]bool{}
	notified := make(chan struct{}, 1)
	onRelease := func(owner string) {
		ownMu.Lock()
		mine := own[owner]
		ownMu.Unlock()
		if mine {
			return
		}
		select {
		case notified <- struct{}{}:
		default:
		}
	}
	var sub *subscription
	defer func() {
		if sub != nil {
			sub.close()
		}
	}()
	pod := holderPod(o)
	lastReason := "not tried"
	for waits := 0; ; {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: lock %s: %w (%s)", fencepost.ErrNotAcquired, lock, context.Cause(ctx), lastReason)
		}
		owner := NewOwnerID(pod)
		ownMu.Lock()
		own[owner] = true
		ownMu.Unlock()
		var floor fencepost.Token
		if o.Floor != nil {
			if floor, err = o.Floor(ctx, lock); err != nil {
				return nil, fmt.Errorf("store: floor of lock %s: %w", lock, err)
			}
			if !floor.Valid() || floor == fencepost.MaxToken {
				return nil, fmt.Errorf("store: floor of lock %s: %s leaves no token above it", lock, floor)
			}
		}
		// The attempt is not cut off by ctx: a grant whose answer was lost would hold the key
		// until its TTL. Its own bound is the command timeout.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CommandTimeout)
		a, err := b.tryAcquire(actx, owner, c.ttl, floor)
		cancel()
		if err != nil {
			a = attempt{reason: err.Error()}
			// The script may have run with the answer lost: give the key back (best effort).
			go func() {
				rctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
				defer cancel()
				_ = b.release(rctx, owner)
			}()
		}
		// A grant answered after its own validity (a slow reply, a pause) is worth nothing.
		if a.granted && elapsedSince(a.sent, time.Now()) >= Validity(c.ttl) {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CommandTimeout)
			_ = b.release(rctx, owner)
			cancel()
			a = attempt{reason: "granted token " + a.token.String() + " too late: its validity had passed"}
		}
		if a.granted {
			return newLock(lock, c, b, owner, a, done), nil
		}
		lastReason = a.reason
		if a.held && o.IfHeld == fencepost.IfHeldFail {
			return nil, fmt.Errorf("%w: %w: lock %s: %s", fencepost.ErrNotAcquired, ErrHeld, lock, a.reason)
		}
		var left time.Duration
		if !deadline.IsZero() {
			if left = time.Until(deadline); left <= 0 {
				return nil, fmt.Errorf("%w: lock %s not granted within %s (%s)", fencepost.ErrNotAcquired, lock, o.Wait, lastReason)
			}
		}
		if sub == nil {
			// Listening before waiting, but for 250 ms at most; then try again at once: the
			// release may have come before the subscription.
			s := b.subscribe(onRelease)
			sub = &s
			t := time.NewTimer(subscribeWait)
			select {
			case <-sub.ready:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		select {
		case <-notified:
			continue
		default:
		}
		delay := retryDelay(waits, jitter, a.heldFor, a.haveHeldFor, left, !deadline.IsZero())
		waits++
		t := time.NewTimer(delay)
		select {
		case <-notified:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// jitter is the backoff's random source, [0, 1) (a variable for the tests).
var jitter = mathrand.Float64

// elapsedSince is the time from then to now by whichever clock ran further: the monotonic one, or
// the wall clock (a VM pause stops the monotonic clock; a wall clock stepped back is ignored).
func elapsedSince(then, now time.Time) time.Duration {
	// Sub uses the monotonic readings; Round(0) strips them, leaving the wall clock.
	return max(now.Sub(then), now.Round(0).Sub(then.Round(0)))
}
