package fencepost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// IfHeld says what Acquire does when another pod holds the lock.
type IfHeld string

const (
	// IfHeldWait waits for the lock (the default; in Mutex mode: joins the queue).
	IfHeldWait IfHeld = "wait"
	// IfHeldFail returns ErrNotAcquired at once, leaving no request queued.
	IfHeldFail IfHeld = "fail"
)

// Options configure Acquire. The zero value waits until ctx is done for the agent at
// $FENCEPOST_AGENT_URL, else DefaultBaseURL.
type Options struct {
	// BaseURL is the agent's lock API (default $FENCEPOST_AGENT_URL, else DefaultBaseURL).
	BaseURL string
	// Wait bounds the wait for the grant; 0 waits until ctx is done (forever without a deadline).
	Wait time.Duration
	// RunID asks for a Mutex run once per id: ErrAlreadyDone when some holder completed it;
	// Lock.Complete reports it done.
	RunID string
	// IfHeld is IfHeldWait (default) or IfHeldFail.
	IfHeld IfHeld
	// HTTPClient sends the requests (default http.DefaultClient); every request is bounded by a
	// context, so it needs no Timeout of its own.
	HTTPClient *http.Client
}

// Lock is a term of a lock held through the agent. Its methods are safe for concurrent use.
type Lock struct {
	a      *agent
	runID  string
	token  Token
	permit *int

	ctx    context.Context
	cancel context.CancelCauseFunc
	events chan Event
	kick   chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	validFrom time.Time // when the read that gave validFor was sent (monotonic and wall)
	validFor  time.Duration
	ended     error

	releaseOnce sync.Once
	releaseErr  error
}

// maxWaitPerRequest bounds one acquire request; a longer wait asks again (Mutex keeps the place).
const maxWaitPerRequest = 30 * time.Second

// withdrawTimeout bounds the release that withdraws a request Acquire gave up on.
const withdrawTimeout = 5 * time.Second

// Acquire asks the agent for the lock and waits until it is granted, ctx is done or Wait has
// passed. It returns a held Lock — release it (defer lock.Release()) — or an error: one that
// matches ErrNotAcquired (not granted in time, ctx cancelled, or held elsewhere with IfHeldFail;
// a queued request is withdrawn), ErrAlreadyDone (RunID already completed), ErrLost (lost before
// Acquire returned), or the agent's or the network's error. ctx bounds only the wait: the lock
// lives on after it, until Release or loss (see Lock.Context).
func Acquire(ctx context.Context, lock string, o Options) (*Lock, error) {
	a, err := newAgent(lock, o)
	if err != nil {
		return nil, err
	}
	if o.IfHeld != "" && o.IfHeld != IfHeldWait && o.IfHeld != IfHeldFail {
		return nil, fmt.Errorf("fencepost: IfHeld must be %q or %q, got %q", IfHeldWait, IfHeldFail, o.IfHeld)
	}
	waitCtx := ctx
	if o.Wait > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, o.Wait)
		defer cancel()
	}
	snap, asked, err := a.acquire(waitCtx, o)
	if err != nil {
		// Withdraw only what this call may have left queued: never when it asked nothing (the
		// pod's session may be another process's), nor after held or already-done (the agent
		// left nothing).
		var p *ProblemError
		final := errors.As(err, &p) && (p.Name() == "held" || p.Name() == "already-done")
		if asked && !final {
			a.withdraw(ctx)
		}
		return nil, err
	}
	if !snap.Held || snap.Token == nil {
		a.withdraw(ctx)
		return nil, fmt.Errorf("%w: the agent answered the acquire with state %s", ErrLost, snap.State)
	}
	l := &Lock{
		a:      a,
		runID:  o.RunID,
		token:  *snap.Token,
		permit: snap.Permit,
		events: make(chan Event, 64),
		kick:   make(chan struct{}, 1),
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	// The acquire may have waited long: its answer's time left is counted from a fresh read.
	rctx, cancel := context.WithTimeout(ctx, withdrawTimeout)
	defer cancel()
	lost, readErr := l.refresh(rctx)
	if readErr != nil {
		lost = fmt.Errorf("fencepost: lock %s granted, but its state could not be read: %w", lock, readErr)
	}
	if lost != nil {
		l.end(lost)
	}
	if err := context.Cause(l.ctx); err != nil {
		a.withdraw(ctx)
		return nil, err
	}
	l.wg.Add(3)
	go l.stream()
	go l.refresher()
	go l.watchdog()
	return l, nil
}

// acquire asks until granted, refused, or ctx is done; asked says whether a request was sent.
func (a *agent) acquire(ctx context.Context, o Options) (snap *Snapshot, asked bool, err error) {
	for {
		wait := maxWaitPerRequest
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if ctx.Err() != nil || wait <= 0 {
			return nil, asked, fmt.Errorf("%w: lock %s not granted in time: %w", ErrNotAcquired, a.lock, context.Cause(ctx))
		}
		q := url.Values{"wait": {fmt.Sprintf("%dms", wait.Milliseconds())}}
		if o.RunID != "" {
			q.Set("runId", o.RunID)
		}
		if o.IfHeld != "" {
			q.Set("ifHeld", string(o.IfHeld))
		}
		// The agent answers when the wait ends; a deadline of ctx must not cut that answer off,
		// only an explicit cancellation aborts the request.
		reqCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+10*time.Second)
		stop := context.AfterFunc(ctx, func() {
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				cancel()
			}
		})
		asked = true
		snap, err = a.do(reqCtx, http.MethodPost, a.url("/acquire", q))
		stop()
		cancel()
		var p *ProblemError
		switch {
		case err == nil:
			return snap, true, nil
		case errors.As(err, &p) && p.Name() == "not-granted":
			continue // ask again while ctx allows (a Mutex request keeps its place)
		case errors.As(err, &p):
			return nil, true, err
		case ctx.Err() != nil:
			return nil, true, fmt.Errorf("%w: lock %s: %w", ErrNotAcquired, a.lock, context.Cause(ctx))
		default:
			return nil, true, err
		}
	}
}

// withdraw releases, best effort, what an abandoned acquire may have left: a queued request or
// a term granted while the answer was lost.
func (a *agent) withdraw(ctx context.Context) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
	defer cancel()
	_, _ = a.do(wctx, http.MethodPost, a.url("/release", nil))
}

// Name is the lock's name.
func (l *Lock) Name() string { return l.a.lock }

// Token is this term's fencing token: pass it with every write to a guarded resource.
func (l *Lock) Token() Token { return l.token }

// Permit is the Semaphore permit this term holds, and false for Election and Mutex locks.
func (l *Lock) Permit() (int, bool) {
	if l.permit == nil {
		return 0, false
	}
	return *l.permit, true
}

// Context is cancelled the moment the term ends: lost (context.Cause matches ErrLost) or
// released (ErrReleased). Pass it to the work done under the lock.
func (l *Lock) Context() context.Context { return l.ctx }

// Err is nil while the term lasts, then why it ended (matches ErrLost or ErrReleased).
func (l *Lock) Err() error { return context.Cause(l.ctx) }

// Events delivers the lock's events (renewed, lost, released, draining, ...) as the agent sends
// them. The channel is buffered; events are dropped while it is full. It is closed when the term
// has ended.
func (l *Lock) Events() <-chan Event { return l.events }

// Held reports whether the term is still valid now: not lost or released, and the time the agent
// last gave for it has not run out since that read was sent — on the monotonic clock and on the
// wall clock (a VM pause stops the monotonic clock; a wall clock stepped back is ignored). It is
// a belief: a process paused after Held returned true still writes with this token, and the
// guard at the resource is what refuses that write.
func (l *Lock) Held() bool {
	l.mu.Lock()
	ended, left := l.ended, l.remainingLocked()
	l.mu.Unlock()
	if ended != nil {
		return false
	}
	if left <= 0 {
		l.end(fmt.Errorf("%w: the term's time ran out", ErrLost))
		return false
	}
	return true
}

func (l *Lock) remainingLocked() time.Duration {
	now := time.Now()
	// Sub uses the monotonic readings; Round(0) strips them, leaving the wall clock.
	return remaining(l.validFor, now.Sub(l.validFrom), now.Round(0).Sub(l.validFrom.Round(0)))
}

// remaining is the time left of a term valid for validFor after the monotonic and the wall clock
// advanced by mono and wall: the larger advance counts (a VM pause stops the monotonic clock; a
// wall clock stepped back, a negative wall, changes nothing).
func remaining(validFor, mono, wall time.Duration) time.Duration {
	return validFor - max(mono, wall)
}

// end ends the term with cause err (only the first end counts).
func (l *Lock) end(err error) {
	l.mu.Lock()
	if l.ended != nil {
		l.mu.Unlock()
		return
	}
	l.ended = err
	l.mu.Unlock()
	l.cancel(err)
}

// refresh reads the agent's state and counts the term's time left from when the read was sent.
// It returns lost (matching ErrLost) when the read shows the term over, and readErr when the
// read failed: that changes nothing (the term's time runs out unless a later read succeeds).
func (l *Lock) refresh(ctx context.Context) (lost, readErr error) {
	sent := time.Now()
	s, err := l.a.do(ctx, http.MethodGet, l.a.url("", nil))
	if err != nil {
		return nil, err
	}
	if !s.Held || s.Token == nil || *s.Token != l.token {
		return fmt.Errorf("%w: the agent says %s", ErrLost, s.State), nil
	}
	l.mu.Lock()
	if l.ended == nil {
		l.validFrom, l.validFor = sent, s.ExpiresIn()
	}
	l.mu.Unlock()
	return nil, nil
}

// refresher re-reads the state when an event asks for it, and at least every third of the term.
func (l *Lock) refresher() {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		every := max(l.validFor/3, 200*time.Millisecond)
		l.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-l.kick:
		case <-t.C:
		}
		t.Stop()
		ctx, cancel := context.WithTimeout(l.ctx, withdrawTimeout)
		if lost, _ := l.refresh(ctx); lost != nil {
			l.end(lost)
		}
		cancel()
	}
}

// watchdog ends the term when its time runs out, re-reading the clocks at least every 250 ms so
// that a deadline passed during a pause is noticed right after it.
func (l *Lock) watchdog() {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		left := l.remainingLocked()
		l.mu.Unlock()
		if left <= 0 {
			l.end(fmt.Errorf("%w: the term's time ran out", ErrLost))
			return
		}
		t := time.NewTimer(min(left, 250*time.Millisecond))
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// stream follows the lock's events (SSE), reconnecting with Last-Event-ID until the term ends.
func (l *Lock) stream() {
	defer l.wg.Done()
	defer close(l.events)
	lastID := ""
	for l.ctx.Err() == nil {
		req, err := http.NewRequestWithContext(l.ctx, http.MethodGet, l.a.url("/events", nil), nil)
		if err != nil {
			l.end(err)
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		if res, err := l.a.http.Do(req); err == nil {
			_ = readSSE(res.Body, func(m sseMessage) {
				if m.id != "" {
					lastID = m.id
				}
				l.handle(m)
			})
			res.Body.Close()
		}
		t := time.NewTimer(time.Second)
		select {
		case <-l.ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// handle acts on one event: a state or a renewal asks for a fresh read; lost or released of this
// term ends it; everything else is passed on.
func (l *Lock) handle(m sseMessage) {
	if m.event == "state" {
		l.refreshSoon()
		return
	}
	var e Event
	if err := json.Unmarshal([]byte(m.data), &e); err != nil {
		return
	}
	select {
	case l.events <- e:
	default:
	}
	switch {
	case (e.Type == "lost" || e.Type == "released") && e.Token == l.token:
		l.end(fmt.Errorf("%w: %s: %s", ErrLost, e.Type, e.Reason))
	case (e.Type == "granted" || e.Type == "renewed") && e.Token != l.token:
		l.end(fmt.Errorf("%w: a term with token %s began", ErrLost, e.Token))
	case e.Type == "granted" || e.Type == "renewed":
		l.refreshSoon()
	}
}

func (l *Lock) refreshSoon() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Release stops believing in the term, then asks the agent to release the lock (and withdraw a
// Mutex request), bounded by 10 s. It is idempotent: later calls return the first one's result.
// Made for `defer lock.Release()`.
func (l *Lock) Release() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return l.ReleaseContext(ctx)
}

// ReleaseContext is Release bounded by ctx.
func (l *Lock) ReleaseContext(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		l.end(ErrReleased)
		_, l.releaseErr = l.a.do(ctx, http.MethodPost, l.a.url("/release", nil))
		l.wg.Wait()
	})
	return l.releaseErr
}

// Complete reports the run id of Acquire completed (only the holder of the run's term can; after
// a loss it fails with an error matching ErrLost and reports nothing). Release afterwards.
func (l *Lock) Complete(ctx context.Context) error {
	if l.runID == "" {
		return errors.New("fencepost: Complete needs Options.RunID")
	}
	q := url.Values{"runId": {l.runID}, "token": {l.token.String()}}
	_, err := l.a.do(ctx, http.MethodPost, l.a.url("/complete", q))
	return err
}
