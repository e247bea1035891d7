package fencepost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAgent answers the agent's lock API for one lock with canned answers: the unit tests of the
// client's own logic. The real agent is test/integration/clients/go.test.ts.
type fakeAgent struct {
	t        *testing.T
	mu       sync.Mutex
	acquire  func(r *http.Request) (int, string)
	state    func() (int, string) // GET /v1/locks/billing
	events   chan string          // SSE frames to send
	released atomic.Int32
	complete func(r *http.Request) (int, string)
}

func newFakeAgent(t *testing.T) (*fakeAgent, *httptest.Server) {
	f := &fakeAgent{t: t, events: make(chan string, 16)}
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, status int, body string) {
		ct := "application/json"
		if status != http.StatusOK {
			ct = "application/problem+json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
	mux.HandleFunc("POST /v1/locks/billing/acquire", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		h := f.acquire
		f.mu.Unlock()
		s, b := h(r)
		answer(w, s, b)
	})
	mux.HandleFunc("GET /v1/locks/billing", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		h := f.state
		f.mu.Unlock()
		s, b := h()
		answer(w, s, b)
	})
	mux.HandleFunc("POST /v1/locks/billing/release", func(w http.ResponseWriter, r *http.Request) {
		f.released.Add(1)
		answer(w, 200, `{"lock":"billing","held":false,"state":"released"}`)
	})
	mux.HandleFunc("POST /v1/locks/billing/complete", func(w http.ResponseWriter, r *http.Request) {
		s, b := f.complete(r)
		answer(w, s, b)
	})
	mux.HandleFunc("GET /v1/locks/billing/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 1000\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case frame := <-f.events:
				fmt.Fprint(w, frame)
				w.(http.Flusher).Flush()
			}
		}
	})
	// As the real agent: a POST without Content-Type: application/json and the body {} is 415.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if r.Header.Get("Content-Type") != "application/json" || string(body) != "{}" {
				answer(w, http.StatusUnsupportedMediaType, `{"type":"https://fencepost.io/problems/json-body-required","title":"POST requires Content-Type: application/json and a JSON object body","status":415,"detail":"not JSON"}`)
				return
			}
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeAgent) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

const heldMax = `{"lock":"billing","held":true,"token":"9223372036854775807","holder":"p","expiresInMs":%d,"state":"held"}`

func heldFor(ms int) func() (int, string) {
	return func() (int, string) { return 200, fmt.Sprintf(heldMax, ms) }
}

func granted(ms int) func(*http.Request) (int, string) {
	return func(*http.Request) (int, string) { return 200, fmt.Sprintf(heldMax, ms) }
}

// within fails the test unless cond becomes true within d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAcquireHoldsWithTheExactTokenAndReleases(t *testing.T) {
	f, srv := newFakeAgent(t)
	f.set(func() { f.acquire, f.state = granted(5000), heldFor(5000) })
	lock, err := Acquire(context.Background(), "billing", Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if lock.Token() != MaxToken || lock.Token().String() != "9223372036854775807" {
		t.Fatalf("token = %s", lock.Token())
	}
	if !lock.Held() || lock.Err() != nil {
		t.Fatalf("not held after acquire: %v", lock.Err())
	}
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	if lock.Held() || !errors.Is(context.Cause(lock.Context()), ErrReleased) || f.released.Load() != 1 {
		t.Fatalf("after Release: held=%v cause=%v releases=%d", lock.Held(), context.Cause(lock.Context()), f.released.Load())
	}
	if err := lock.Release(); err != nil || f.released.Load() != 1 {
		t.Fatalf("second Release: %v, %d requests", err, f.released.Load())
	}
	if _, open := <-lock.Events(); open {
		t.Fatal("Events still open after Release")
	}
}

func TestHeldEndsWhenTheTermRunsOutWithoutAFreshRead(t *testing.T) {
	f, srv := newFakeAgent(t)
	f.set(func() { f.acquire, f.state = granted(400), heldFor(400) })
	lock, err := Acquire(context.Background(), "billing", Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	start := time.Now()
	// The agent stops answering (cut off, paused): no read extends the term.
	f.set(func() { f.state = func() (int, string) { time.Sleep(2 * time.Second); return 503, "" } })
	<-lock.Context().Done()
	took := time.Since(start)
	if !errors.Is(context.Cause(lock.Context()), ErrLost) || lock.Held() {
		t.Fatalf("cause %v, held %v", context.Cause(lock.Context()), lock.Held())
	}
	if took > 400*time.Millisecond+300*time.Millisecond {
		t.Fatalf("Context cancelled %s after the last read; the term was 400ms", took)
	}
}

func TestFreshReadsExtendTheTerm(t *testing.T) {
	f, srv := newFakeAgent(t)
	f.set(func() { f.acquire, f.state = granted(400), heldFor(400) })
	lock, err := Acquire(context.Background(), "billing", Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	time.Sleep(1200 * time.Millisecond) // three terms: the refresher's reads (every 200 ms) renew it
	if !lock.Held() {
		t.Fatalf("lost although every read said held: %v", lock.Err())
	}
}

func TestALostEventCancelsTheContext(t *testing.T) {
	f, srv := newFakeAgent(t)
	f.set(func() { f.acquire, f.state = granted(60000), heldFor(60000) })
	lock, err := Acquire(context.Background(), "billing", Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	f.events <- "event: renewed\nid: a-1\ndata: {\"type\":\"renewed\",\"lock\":\"billing\",\"token\":\"9223372036854775807\",\"expiresInMs\":60000}\n\n"
	f.events <- "event: lost\nid: a-2\ndata: {\"type\":\"lost\",\"lock\":\"billing\",\"token\":\"9223372036854775807\",\"reason\":\"granted to q\"}\n\n"
	select {
	case <-lock.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Context not cancelled within 5s of the lost event")
	}
	if !errors.Is(context.Cause(lock.Context()), ErrLost) || lock.Held() {
		t.Fatalf("cause %v", context.Cause(lock.Context()))
	}
	var types []string
	for e := range lock.Events() {
		types = append(types, e.Type)
	}
	if fmt.Sprint(types) != "[renewed lost]" {
		t.Fatalf("events %v", types)
	}
}

func TestAGrantThatIsAlreadyOverIsNotReturned(t *testing.T) {
	f, srv := newFakeAgent(t)
	f.set(func() {
		f.acquire = granted(5000)
		f.state = func() (int, string) {
			return 200, `{"lock":"billing","held":false,"token":"9223372036854775807","state":"lost"}`
		}
	})
	_, err := Acquire(context.Background(), "billing", Options{BaseURL: srv.URL})
	if !errors.Is(err, ErrLost) {
		t.Fatalf("Acquire = %v, want ErrLost", err)
	}
}

func TestNotGrantedInTimeWithdrawsTheRequest(t *testing.T) {
	f, srv := newFakeAgent(t)
	var asked atomic.Int32
	f.set(func() {
		f.acquire = func(r *http.Request) (int, string) {
			asked.Add(1)
			d, _ := time.ParseDuration(r.URL.Query().Get("wait"))
			time.Sleep(d)
			return 423, `{"type":"https://fencepost.io/problems/not-granted","title":"t","status":423,"detail":"d","lock":"billing","snapshot":{"lock":"billing","held":false,"state":"waiting"}}`
		}
	})
	start := time.Now()
	_, err := Acquire(context.Background(), "billing", Options{BaseURL: srv.URL, Wait: 300 * time.Millisecond})
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Acquire = %v", err)
	}
	if took := time.Since(start); took < 250*time.Millisecond || took > 2*time.Second {
		t.Fatalf("gave up after %s for a 300ms wait", took)
	}
	if f.released.Load() != 1 {
		t.Fatalf("%d withdrawals, want 1", f.released.Load())
	}
}

func TestAlreadyDoneAndHeldElsewhereAreTypedAndLeaveNothingToWithdraw(t *testing.T) {
	f, srv := newFakeAgent(t)
	for _, c := range []struct {
		body string
		want error
		o    Options
	}{
		{`{"type":"https://fencepost.io/problems/already-done","title":"t","status":409,"detail":"d","lock":"billing","runId":"r1"}`, ErrAlreadyDone, Options{RunID: "r1"}},
		{`{"type":"https://fencepost.io/problems/held","title":"t","status":423,"detail":"d","lock":"billing","holder":"q","snapshot":{"lock":"billing","held":false,"holder":"q","state":"waiting"}}`, ErrNotAcquired, Options{IfHeld: IfHeldFail}},
	} {
		var query string
		f.set(func() {
			f.acquire = func(r *http.Request) (int, string) {
				query = r.URL.RawQuery
				if c.want == ErrAlreadyDone {
					return 409, c.body
				}
				return 423, c.body
			}
		})
		c.o.BaseURL = srv.URL
		_, err := Acquire(context.Background(), "billing", c.o)
		var p *ProblemError
		if !errors.Is(err, c.want) || !errors.As(err, &p) {
			t.Fatalf("Acquire = %v, want %v", err, c.want)
		}
		if f.released.Load() != 0 {
			t.Fatalf("withdrew after %s", p.Name())
		}
		if c.o.RunID != "" && query != "runId=r1&wait=30000ms" || c.o.IfHeld != "" && query != "ifHeld=fail&wait=30000ms" {
			t.Fatalf("query %q", query)
		}
	}
}

func TestCompleteNamesTheRunAndTheToken(t *testing.T) {
	f, srv := newFakeAgent(t)
	var query string
	f.set(func() {
		f.acquire, f.state = granted(60000), heldFor(60000)
		f.complete = func(r *http.Request) (int, string) {
			query = r.URL.RawQuery
			return 409, `{"type":"https://fencepost.io/problems/not-held","title":"t","status":409,"detail":"d","lock":"billing","snapshot":{"lock":"billing","held":false,"state":"lost"}}`
		}
	})
	lock, err := Acquire(context.Background(), "billing", Options{BaseURL: srv.URL, RunID: "2026-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if err := lock.Complete(context.Background()); !errors.Is(err, ErrLost) {
		t.Fatalf("Complete = %v, want ErrLost", err)
	}
	if query != "runId=2026-01-01&token=9223372036854775807" {
		t.Fatalf("query %q", query)
	}
}

func TestAnAcquireThatAskedNothingWithdrawsNothing(t *testing.T) {
	f, srv := newFakeAgent(t)
	f.set(func() { f.acquire = granted(5000) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Acquire(ctx, "billing", Options{BaseURL: srv.URL}); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("Acquire = %v", err)
	}
	// Another process of the pod may hold the lock through the same agent: no release.
	if f.released.Load() != 0 {
		t.Fatalf("%d releases for an acquire that asked nothing", f.released.Load())
	}
}
