package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
)

// lapseCheck bounds how long the lapse watcher sleeps before it re-reads the clocks, so that a
// validity passed during a pause (the monotonic clock stood still) is noticed right after it.
const lapseCheck = 250 * time.Millisecond

// Lock is a store lock held by this process. Its methods are safe for concurrent use.
type Lock struct {
	name           string
	keys           Keys
	ttl            time.Duration
	token          fencepost.Token
	counterMissing bool
	clockFloored   bool
	b              backend
	owner          string
	base           time.Time // the grant's send time: validUntil is measured from it
	done           func()

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	validUntil time.Duration // elapsedSince(base, ·) at which trust ends
	ended      error
	events     chan fencepost.Event
	eventsOpen bool

	releaseOnce sync.Once
	releaseErr  error
}

func newLock(name string, c checked, b backend, owner string, a attempt, done func()) *Lock {
	l := &Lock{
		name: name, keys: c.keys, ttl: c.ttl, token: a.token, counterMissing: a.counterMissing, clockFloored: a.clockFloored,
		b: b, owner: owner, base: a.sent, done: done,
		validUntil: Validity(c.ttl),
		events:     make(chan fencepost.Event, 64),
		eventsOpen: true,
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.wg.Add(2)
	go l.renewer()
	go l.lapse()
	return l
}

// Name is the lock's name.
func (l *Lock) Name() string { return l.name }

// Keys are the lock's Redis keys and release channel.
func (l *Lock) Keys() Keys { return l.keys }

// Token is this grant's fencing token: pass it with every write to a guarded resource.
func (l *Lock) Token() fencepost.Token { return l.token }

// CounterMissing reports that the fencing counter did not exist before this grant (Redlock: on
// none of the majority): a new lock's first grant, or the store lost its data — it cannot tell
// which (docs/stores.md). The token then starts from the Redis server's clock (ClockFloored).
func (l *Lock) CounterMissing() bool { return l.counterMissing }

// ClockFloored reports that this grant's token was floored at the Redis server's clock in
// microseconds (about 1.8e15 today), because the Redis process issuing it is not the one that
// issued the lock's last token: a new or lost counter, a failover, a restart, a moved slot
// (fence-next.lua fence_epoch; on Redlock, on any master of the majority). The token is still above
// every earlier one as long as that server's clock is not behind the previous issuer's by more
// than the time since (docs/stores.md). Without CounterMissing it means the lock's tokens now come
// from another Redis process; worth a log line, not an error.
func (l *Lock) ClockFloored() bool { return l.clockFloored }

// TTL is the holder key's time to live.
func (l *Lock) TTL() time.Duration { return l.ttl }

// Context is cancelled the moment the lock ends: lost (context.Cause matches fencepost.ErrLost)
// or released (fencepost.ErrReleased). Pass it to the work done under the lock.
func (l *Lock) Context() context.Context { return l.ctx }

// Err is nil while the lock lasts, then why it ended (matches fencepost.ErrLost or
// fencepost.ErrReleased).
func (l *Lock) Err() error { return context.Cause(l.ctx) }

// Events delivers the lock's changes — renewed, lost, released — as fencepost.Event values (the
// agent's event shapes). The channel is buffered; events are dropped while it is full. Release
// closes it (after a loss, too: the lost event comes first).
func (l *Lock) Events() <-chan fencepost.Event { return l.events }

// Held reports whether the lock is still trusted now: not lost or released, and the validity of
// the last grant or renew (its send time + TTL − drift) has not passed, on the monotonic clock
// and on the wall clock (whichever ran further). A belief: a process paused after Held returned
// true still writes with this token, and the guard at the resource is what refuses that write.
func (l *Lock) Held() bool {
	l.mu.Lock()
	ended, left := l.ended, l.validUntil-elapsedSince(l.base, time.Now())
	l.mu.Unlock()
	if ended != nil {
		return false
	}
	if left <= 0 {
		l.lose("the validity passed without a renew")
		return false
	}
	return true
}

// emitLocked sends e without blocking; l.mu is held.
func (l *Lock) emitLocked(typ, reason string, expiresIn *time.Duration) {
	if !l.eventsOpen {
		return
	}
	e := fencepost.Event{Type: typ, Lock: l.name, Token: l.token, Reason: reason}
	if expiresIn != nil {
		v := float64(max(*expiresIn, 0)) / float64(time.Millisecond)
		e.ExpiresInMs = &v
	}
	select {
	case l.events <- e:
	default:
	}
}

// lose ends the lock as lost (only the first end counts).
func (l *Lock) lose(reason string) {
	l.mu.Lock()
	if l.ended != nil {
		l.mu.Unlock()
		return
	}
	l.ended = fmt.Errorf("%w: lock %s (token %s): %s", fencepost.ErrLost, l.name, l.token, reason)
	l.emitLocked("lost", reason, nil)
	err := l.ended
	l.mu.Unlock()
	l.cancel(err)
}

// lapse ends the lock at the end of its validity, whatever a renew in flight will say: that
// answer cannot reach back.
func (l *Lock) lapse() {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		left := l.validUntil - elapsedSince(l.base, time.Now())
		l.mu.Unlock()
		if left <= 0 {
			l.lose("the validity passed without a renew")
			return
		}
		t := time.NewTimer(min(left, lapseCheck))
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// renewer is the watchdog: a compare-and-PEXPIRE every third of the TTL; one that gets no answer
// is retried every 100 ms until the validity passes; one that finds the key gone or another
// owner's ends the lock at once.
func (l *Lock) renewer() {
	defer l.wg.Done()
	next := RenewEvery(l.ttl)
	for {
		t := time.NewTimer(next)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		sent := time.Now()
		l.mu.Lock()
		sentAt, until := elapsedSince(l.base, sent), l.validUntil
		l.mu.Unlock()
		if sentAt >= until {
			l.lose("the validity passed before the renew was sent")
			return
		}
		// Cancelled with the lock: a loss at the validity's end does not wait for the answer.
		rctx, cancel := context.WithTimeout(l.ctx, CommandTimeout)
		ok, err := l.b.renew(rctx, l.owner, l.ttl)
		cancel()
		if l.ctx.Err() != nil {
			return
		}
		outcome, errText := renewed, ""
		switch {
		case err != nil:
			outcome, errText = failed, err.Error()
		case !ok:
			outcome = notOwner
		}
		l.mu.Lock()
		d := afterRenew(outcome, errText, sentAt, elapsedSince(l.base, time.Now()), l.validUntil, l.ttl)
		if !d.lost && !d.retry && l.ended == nil {
			l.validUntil = d.validUntil
			left := d.validUntil - elapsedSince(l.base, time.Now())
			l.emitLocked("renewed", "", &left)
		}
		l.mu.Unlock()
		if d.lost {
			l.lose(d.reason)
			return
		}
		next = d.next
	}
}

// Release stops believing in the lock, stops its watchdog, then gives it up — compare-and-DEL
// and a PUBLISH for waiters, also after a loss (if the key is still this owner's after all,
// waiters need not wait out its TTL) — bounded by 10 s. Idempotent: later calls return the first
// one's result. Made for `defer lock.Release()`.
func (l *Lock) Release() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return l.ReleaseContext(ctx)
}

// ReleaseContext is Release bounded by ctx.
func (l *Lock) ReleaseContext(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		l.mu.Lock()
		if l.ended == nil {
			l.ended = fencepost.ErrReleased
			l.emitLocked("released", "", nil)
		}
		l.mu.Unlock()
		l.cancel(fencepost.ErrReleased)
		l.wg.Wait()
		l.releaseErr = l.b.release(ctx, l.owner)
		l.mu.Lock()
		l.eventsOpen = false
		close(l.events)
		l.mu.Unlock()
		if l.done != nil {
			l.done()
		}
	})
	return l.releaseErr
}
