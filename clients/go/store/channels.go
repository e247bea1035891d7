package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscription is a waiter's interest in a lock's releases: ready is closed once a server confirmed
// the subscription (on Redlock: the first master that did); close ends it.
type subscription struct {
	ready <-chan struct{}
	close func()
}

// releaseChannels is one subscriber connection (made on first use) for every lock channel of one
// Redis client. A worker goroutine brings the server's subscriptions to the listeners' wants
// (level-triggered: a quick unsubscribe-and-resubscribe cannot leave them out of order), so that
// listen never waits on the network. go-redis re-subscribes after a reconnect; a release published
// meanwhile is found by the waiter's backoff.
type releaseChannels struct {
	client redis.UniversalClient
	kick   chan struct{}

	mu        sync.Mutex
	ps        *redis.PubSub
	listeners map[string]map[int]func(payload string)
	next      int
	sent      map[string]bool // SUBSCRIBE sent and not yet undone by an UNSUBSCRIBE
	confirmed map[string]bool // the server confirmed the SUBSCRIBE in sent
	waiting   map[string][]chan struct{}
	started   bool
	closed    bool
}

func newReleaseChannels(c redis.UniversalClient) *releaseChannels {
	return &releaseChannels{
		client:    c,
		kick:      make(chan struct{}, 1),
		listeners: map[string]map[int]func(payload string){},
		sent:      map[string]bool{},
		confirmed: map[string]bool{},
		waiting:   map[string][]chan struct{}{},
	}
}

// listen calls fn (which must not block) with every message on channel (a release publishes the
// released owner id); the returned ready is closed once the server confirmed the subscription.
func (r *releaseChannels) listen(channel string, fn func(payload string)) subscription {
	ready := make(chan struct{})
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return subscription{ready: ready, close: func() {}}
	}
	set := r.listeners[channel]
	if set == nil {
		set = map[int]func(payload string){}
		r.listeners[channel] = set
	}
	id := r.next
	r.next++
	set[id] = fn
	if r.confirmed[channel] {
		close(ready)
	} else {
		r.waiting[channel] = append(r.waiting[channel], ready)
	}
	if !r.started {
		r.started = true
		go r.work()
	}
	r.pokeLocked()
	r.mu.Unlock()
	var once sync.Once
	return subscription{ready: ready, close: func() { once.Do(func() { r.off(channel, id) }) }}
}

func (r *releaseChannels) off(channel string, id int) {
	r.mu.Lock()
	if set := r.listeners[channel]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(r.listeners, channel)
		}
	}
	if !r.closed {
		r.pokeLocked()
	}
	r.mu.Unlock()
}

// pokeLocked wakes the worker; r.mu is held and r is not closed.
func (r *releaseChannels) pokeLocked() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// work sends the SUBSCRIBEs and UNSUBSCRIBEs that make the server's set the listeners' set.
func (r *releaseChannels) work() {
	for range r.kick {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return
		}
		var subs, unsubs []string
		for c := range r.listeners {
			if !r.sent[c] {
				subs = append(subs, c)
				r.sent[c] = true
			}
		}
		for c := range r.sent {
			if r.listeners[c] == nil {
				unsubs = append(unsubs, c)
				delete(r.sent, c)
				delete(r.confirmed, c)
			}
		}
		ps := r.ps
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
		if len(subs) > 0 {
			if ps == nil {
				ps = r.client.Subscribe(ctx, subs...) // a failed write is retried by go-redis's reconnect
				r.mu.Lock()
				r.ps = ps
				closed := r.closed
				r.mu.Unlock()
				if closed {
					_ = ps.Close()
					cancel()
					return
				}
				go r.receive(ps)
			} else {
				_ = ps.Subscribe(ctx, subs...)
			}
		}
		if len(unsubs) > 0 && ps != nil {
			_ = ps.Unsubscribe(ctx, unsubs...)
		}
		cancel()
	}
}

// receive dispatches the subscriber connection's messages until it is closed.
func (r *releaseChannels) receive(ps *redis.PubSub) {
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			r.mu.Lock()
			closed := r.closed
			r.mu.Unlock()
			if closed || errors.Is(err, redis.ErrClosed) {
				return
			}
			time.Sleep(RenewRetry) // go-redis reconnects (and re-subscribes) on the next Receive
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			r.mu.Lock()
			if r.sent[m.Channel] {
				r.confirmed[m.Channel] = true
			}
			for _, w := range r.waiting[m.Channel] {
				close(w)
			}
			delete(r.waiting, m.Channel)
			r.mu.Unlock()
		case *redis.Message:
			r.mu.Lock()
			fns := make([]func(string), 0, len(r.listeners[m.Channel]))
			for _, fn := range r.listeners[m.Channel] {
				fns = append(fns, fn)
			}
			r.mu.Unlock()
			for _, fn := range fns {
				fn(m.Payload)
			}
		}
	}
}

func (r *releaseChannels) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	ps := r.ps
	r.listeners = map[string]map[int]func(payload string){}
	close(r.kick)
	r.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
}

// subscribeQuorum listens on every one of subs' servers; ready is closed as soon as need of them
// confirmed (a master that is down must not hold up a waiter; a Redlock waiter wakes on a
// release heard from a quorum of masters, so it listens once a quorum does).
func subscribeQuorum(subs []subscription, need int) subscription {
	ready := make(chan struct{})
	done := make(chan struct{})
	var mu sync.Mutex
	confirmed := 0
	for _, s := range subs {
		go func() {
			select {
			case <-s.ready:
				mu.Lock()
				confirmed++
				if confirmed == need {
					close(ready)
				}
				mu.Unlock()
			case <-done:
			}
		}()
	}
	var closeOnce sync.Once
	return subscription{ready: ready, close: func() {
		closeOnce.Do(func() {
			close(done)
			for _, s := range subs {
				s.close()
			}
		})
	}}
}
