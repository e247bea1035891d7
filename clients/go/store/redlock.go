package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
	"github.com/redis/go-redis/v9"
)

// Quorum is the majority of n masters: floor(n/2) + 1.
func Quorum(n int) int { return n/2 + 1 }

// master is one Redlock master: its client and its release channels.
type master struct {
	name     string
	client   redis.UniversalClient
	channels *releaseChannels
	// failovers is set for a Sentinel-managed master only (failovers.go).
	failovers *sentinelFailovers
}

// redlockBackend is one lock over N independent masters, with fencing tokens that stay monotonic
// across majorities (src/stores/redlock/quorum.ts; clients/conformance/store.json "tokens.redlock"):
//
//  1. note the time BEFORE sending; send redlock-acquire to every master in parallel, each bounded
//     by MasterTimeout: SET the holder key NX PX and advance that master's counter above the floor;
//  2. held if a quorum granted and the validity (sent + TTL − drift) has not passed;
//  3. token = the largest counter the quorum answered (floor + 1 if none is larger);
//  4. if a quorum answered exactly the token, the grant counts (the usual case: one round trip).
//     Otherwise redlock-raise writes the token (raise-only) to the masters that granted, and the
//     grant counts only if a quorum acknowledged it while this owner still held its key there,
//     within the validity. Any failure releases on every master.
//
// Why tokens only grow: a counted grant left its token on a majority; the next grant's majority
// intersects it and advances that master's counter past it. A master that loses acknowledged data
// (restart without persistence, failover) breaks that, and mutual exclusion with it
// (docs/stores.md, "What breaks Redlock tokens").
type redlockBackend struct {
	masters []master
	keys    Keys
	timeout time.Duration
}

// ask runs f on every master in parallel, each with its own MasterTimeout, and waits for all.
func ask[T any](ctx context.Context, b *redlockBackend, f func(ctx context.Context, m master) (T, error)) ([]T, []error) {
	values := make([]T, len(b.masters))
	errs := make([]error, len(b.masters))
	var wg sync.WaitGroup
	for i, m := range b.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mctx, cancel := context.WithTimeout(ctx, b.timeout)
			defer cancel()
			values[i], errs[i] = f(mctx, m)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", m.name, errs[i])
			}
		}()
	}
	wg.Wait()
	return values, errs
}

type masterGrant struct {
	took         bool
	counter      fencepost.Token
	existed      bool
	epochChanged bool
	heldFor      int64
}

func (b *redlockBackend) releaseAll(ctx context.Context, owner string) error {
	_, errs := ask(context.WithoutCancel(ctx), b, func(ctx context.Context, m master) (struct{}, error) {
		return struct{}{}, releaseScript.Run(ctx, m.client, []string{b.keys.Holder}, owner, b.keys.Channel).Err()
	})
	return errors.Join(errs...)
}

func (b *redlockBackend) tryAcquire(ctx context.Context, owner string, ttl time.Duration, floor fencepost.Token) (attempt, error) {
	n, q := len(b.masters), Quorum(len(b.masters))
	// 1. The time before anything is sent: every key's TTL starts after it.
	sent := time.Now()
	answers, errs := ask(ctx, b, func(ctx context.Context, m master) (masterGrant, error) {
		keys := []string{b.keys.Holder, b.keys.Counter, b.keys.Epoch}
		reply, err := redlockAcquireScript.Run(ctx, m.client, keys, owner, ms(ttl), floor.String()).Slice()
		if err != nil {
			return masterGrant{}, err
		}
		if len(reply) < 2 {
			return masterGrant{}, fmt.Errorf("unexpected reply %v", reply)
		}
		if took, _ := asInt(reply[0]); took != 1 {
			pttl, ok := asInt(reply[1])
			if !ok {
				pttl = -1
			}
			return masterGrant{heldFor: pttl}, nil
		}
		s, _ := reply[1].(string)
		v, err := fencepost.ParseToken(s)
		if err != nil {
			return masterGrant{}, fmt.Errorf("counter %s: %w", b.keys.Counter, err)
		}
		// {1, v, existed, epochChanged} (redlock-acquire.lua).
		existed, epochChanged := int64(0), int64(0)
		if len(reply) >= 4 {
			existed, _ = asInt(reply[2])
			epochChanged, _ = asInt(reply[3])
		}
		return masterGrant{took: true, counter: v, existed: existed == 1, epochChanged: epochChanged == 1}, nil
	})
	var took []int
	held := 0
	heldFor := int64(-1)
	for i, a := range answers {
		switch {
		case errs[i] != nil:
		case a.took:
			took = append(took, i)
		default:
			held++
			if a.heldFor >= 0 && (heldFor < 0 || a.heldFor < heldFor) {
				heldFor = a.heldFor
			}
		}
	}
	validity := Validity(ttl)
	// 2. A majority, within the validity.
	if len(took) < q {
		_ = b.releaseAll(ctx, owner)
		a := attempt{
			// Held when the others' keys alone keep a majority out of reach (not merely masters down).
			held: held > n-q,
			reason: fmt.Sprintf("%d of %d masters granted, %d needed (%d held by another owner, %d did not answer)",
				len(took), n, q, held, n-len(took)-held),
		}
		if err := errors.Join(errs...); err != nil {
			a.reason += ": " + err.Error()
		}
		if heldFor >= 0 {
			a.heldFor, a.haveHeldFor = time.Duration(heldFor)*time.Millisecond, true
		}
		return a, nil
	}
	if time.Since(sent) >= validity {
		_ = b.releaseAll(ctx, owner)
		return attempt{reason: "the validity was spent acquiring a majority"}, nil
	}
	// 3. The token: the largest counter the majority advanced to (each is above the floor).
	token := floor + 1
	missing, floored := true, false
	for _, i := range took {
		token = max(token, answers[i].counter)
		missing = missing && !answers[i].existed
		floored = floored || answers[i].epochChanged
	}
	if token > fencepost.MaxToken || token <= floor {
		_ = b.releaseAll(ctx, owner)
		return attempt{}, fmt.Errorf("the fencing counter %s reached its maximum %d", b.keys.Counter, uint64(fencepost.MaxToken))
	}
	at := 0
	for _, i := range took {
		if answers[i].counter == token {
			at++
		}
	}
	// 4. Already at the token on a majority: counted. Else raised on the masters that granted, and
	// counted only when a majority acknowledged it in time.
	if at >= q {
		return attempt{granted: true, token: token, sent: sent, counterMissing: missing, clockFloored: floored}, nil
	}
	grantedBy := &redlockBackend{keys: b.keys, timeout: b.timeout}
	for _, i := range took {
		grantedBy.masters = append(grantedBy.masters, b.masters[i])
	}
	acks, ackErrs := ask(ctx, grantedBy, func(ctx context.Context, m master) (bool, error) {
		v, err := redlockRaiseScript.Run(ctx, m.client, []string{b.keys.Holder, b.keys.Counter}, owner, token.String()).Int64()
		return v == 1, err
	})
	acked := 0
	for i, ok := range acks {
		if ackErrs[i] == nil && ok {
			acked++
		}
	}
	if acked < q || time.Since(sent) >= validity {
		_ = b.releaseAll(ctx, owner)
		reason := "the validity was spent writing the token"
		if acked < q {
			reason = fmt.Sprintf("%d of %d masters acknowledged token %s, %d needed", acked, n, token, q)
		}
		return attempt{reason: reason}, nil
	}
	return attempt{granted: true, token: token, sent: sent, counterMissing: missing, clockFloored: floored}, nil
}

func (b *redlockBackend) renew(ctx context.Context, owner string, ttl time.Duration) (bool, error) {
	n, q := len(b.masters), Quorum(len(b.masters))
	answers, errs := ask(ctx, b, func(ctx context.Context, m master) (bool, error) {
		v, err := renewScript.Run(ctx, m.client, []string{b.keys.Holder}, owner, ms(ttl)).Int64()
		return v == 1, err
	})
	yes, no := 0, 0
	for i, ok := range answers {
		switch {
		case errs[i] != nil:
		case ok:
			yes++
		default:
			no++
		}
	}
	if yes >= q {
		return true, nil
	}
	// So many masters say "not yours" that a majority is out of reach: lost, no need to wait.
	if no > n-q {
		return false, nil
	}
	return false, fmt.Errorf("%d of %d masters renewed, %d needed (%d said not the owner): %w", yes, n, q, no, errors.Join(errs...))
}

func (b *redlockBackend) release(ctx context.Context, owner string) error {
	return b.releaseAll(ctx, owner)
}

// subscribe listens on every master, and calls onRelease when a quorum of masters published the
// release of one owner id: a holder's release (it held the key on a majority), not the give-back
// of an attempt that took only a minority. Woken by those, waiters would retry at once, again and
// again while the holder holds: with three workers on one lock, two waiters woke each other
// continuously (docs of TestRedlockWaitersAreNotWokenByEachOthersFailedAttempts). A release heard
// on fewer masters (keys that had expired there, a master down) is found by the backoff.
func (b *redlockBackend) subscribe(onRelease func(owner string)) subscription {
	q := Quorum(len(b.masters))
	var mu sync.Mutex
	heard := map[string]int{} // owner id → masters that published its release
	subs := make([]subscription, len(b.masters))
	for i, m := range b.masters {
		subs[i] = m.channels.listen(b.keys.Channel, func(owner string) {
			mu.Lock()
			if len(heard) >= 1024 {
				clear(heard)
			}
			heard[owner]++
			n := heard[owner]
			mu.Unlock()
			if n == q {
				onRelease(owner)
			}
		})
	}
	return subscribeQuorum(subs, q)
}
