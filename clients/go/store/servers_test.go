package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
)

// The store against real redis-servers (each test starts its own: testbed_test.go): single Redis
// and five Redlock masters.

func openStore(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func redlockURL(servers []*testRedis) string {
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = s.addr
	}
	return "redlock://" + strings.Join(hosts, ",")
}

// kinds starts, per store kind, the servers and returns its URL.
var kinds = []struct {
	name    string
	servers int
	url     func([]*testRedis) string
}{
	{"redis", 1, func(s []*testRedis) string { return s[0].url }},
	{"redlock", 5, redlockURL},
}

func mustAcquire(t *testing.T, s *Store, lock string, o Options) *Lock {
	t.Helper()
	l, err := s.Acquire(context.Background(), lock, o)
	if err != nil {
		t.Fatalf("acquire %s: %v", lock, err)
	}
	t.Cleanup(func() { _ = l.Release() })
	return l
}

func waitDone(t *testing.T, l *Lock, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-l.Context().Done():
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("lock %s not ended within %s", l.Name(), within)
		return 0
	}
}

func TestASingleRedisGrantUsesTheSharedKeysAndScripts(t *testing.T) {
	srv := startRedis(t, 1)[0]
	st := openStore(t, srv.url)
	ctx := context.Background()
	before := nowMicros()
	l := mustAcquire(t, st, "billing", Options{Namespace: "team-a", TTL: 2 * time.Second})
	// A new lock: its first token is the Redis server's clock in µs (this host's, on loopback).
	if l.Token() <= before || l.Token() > nowMicros()+1 || !l.CounterMissing() || !l.ClockFloored() || !l.Held() || l.Err() != nil {
		t.Fatalf("token %s (clock %s µs before), counter missing %v, clock floored %v, held %v, err %v",
			l.Token(), before, l.CounterMissing(), l.ClockFloored(), l.Held(), l.Err())
	}
	keys := l.Keys()
	if keys.Holder != "fencepost:lock:{fencepost:fence:team-a/billing}" || keys.Epoch != "fencepost:epoch:{fencepost:fence:team-a/billing}" {
		t.Fatalf("keys %+v", keys)
	}
	if e := srv.client.Get(ctx, keys.Epoch).Val(); e != replID(t, srv) {
		t.Fatalf("epoch key %q, want the server's replication ID %q", e, replID(t, srv))
	}
	owner, err := srv.client.Get(ctx, keys.Holder).Result()
	if err != nil || len(owner) != 32 {
		t.Fatalf("holder key %q: %v", owner, err)
	}
	if pttl := srv.client.PTTL(ctx, keys.Holder).Val(); pttl <= 0 || pttl > 2*time.Second {
		t.Fatalf("holder key PTTL %s", pttl)
	}
	if c := srv.client.Get(ctx, keys.Counter).Val(); c != l.Token().String() {
		t.Fatalf("counter %q, token %s", c, l.Token())
	}

	_, err = st.Acquire(ctx, "billing", Options{Namespace: "team-a", IfHeld: fencepost.IfHeldFail})
	if !errors.Is(err, fencepost.ErrNotAcquired) || !errors.Is(err, ErrHeld) {
		t.Fatalf("a second acquire with IfHeldFail: %v", err)
	}

	sub := srv.client.Subscribe(ctx, keys.Channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != owner {
		t.Fatalf("release published %v %v, want the owner id %q", msg, err, owner)
	}
	if n := srv.client.Exists(ctx, keys.Holder).Val(); n != 0 {
		t.Fatal("the holder key survived the release")
	}
	if l.Held() || !errors.Is(l.Err(), fencepost.ErrReleased) || l.Release() != nil {
		t.Fatalf("after release: held %v, err %v", l.Held(), l.Err())
	}
	var types []string
	for e := range l.Events() {
		types = append(types, e.Type)
	}
	if strings.Join(types, ",") != "released" {
		t.Fatalf("events %v", types)
	}

	l2 := mustAcquire(t, st, "billing", Options{Namespace: "team-a"})
	if l2.Token() != l.Token()+1 || l2.CounterMissing() || l2.ClockFloored() {
		t.Fatalf("second grant: token %s after %s, counter missing %v, clock floored %v", l2.Token(), l.Token(), l2.CounterMissing(), l2.ClockFloored())
	}
}

// nowMicros is this host's clock in microseconds: what a redis-server on loopback floors tokens at.
func nowMicros() fencepost.Token { return fencepost.Token(time.Now().UnixMicro()) }

// replID is the server's INFO replication master_replid: what the acquire scripts record in a
// lock's epoch key.
func replID(t *testing.T, s *testRedis) string {
	t.Helper()
	info, err := s.client.Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "master_replid:"); ok {
			return id
		}
	}
	t.Fatalf("no master_replid in INFO replication: %q", info)
	return ""
}

// seedCounter sets the lock's counter on s to v as if this server process had issued token v: the
// epoch key holds its replication ID, so the next grant there is v + 1, not floored at the clock. Tests that
// count attempts by a counter's value start from it.
func seedCounter(t *testing.T, s *testRedis, keys Keys, v string) {
	t.Helper()
	ctx := context.Background()
	if err := s.client.Set(ctx, keys.Counter, v, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.client.Set(ctx, keys.Epoch, replID(t, s), 0).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestALostCounterOrAnotherRedisProcessFloorsTheNextTokenAtTheClock(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			servers := startRedis(t, k.servers)
			st := openStore(t, k.url(servers))
			ctx := context.Background()
			grant := func() *Lock {
				t.Helper()
				l := mustAcquire(t, st, "flushed", Options{TTL: 2 * time.Second})
				if err := l.Release(); err != nil {
					t.Fatal(err)
				}
				return l
			}
			first := grant()
			if !first.CounterMissing() || !first.ClockFloored() {
				t.Fatalf("first grant: counter missing %v, clock floored %v", first.CounterMissing(), first.ClockFloored())
			}
			// Redlock too: the first grant raised the majority to one token, so they agree again.
			second := grant()
			if second.Token() != first.Token()+1 || second.CounterMissing() || second.ClockFloored() {
				t.Fatalf("second grant: token %s after %s, counter missing %v, clock floored %v",
					second.Token(), first.Token(), second.CounterMissing(), second.ClockFloored())
			}
			// The store lost its data: without the floor, the token would start again from 1.
			for _, s := range servers {
				if err := s.client.FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			flushed := grant()
			if flushed.Token() <= second.Token() || !flushed.CounterMissing() || !flushed.ClockFloored() {
				t.Fatalf("after FLUSHALL: token %s after %s, counter missing %v, clock floored %v",
					flushed.Token(), second.Token(), flushed.CounterMissing(), flushed.ClockFloored())
			}
			// Another Redis process issued the last token (a failover, a restart): the counter is
			// there, but may be behind; floored at the clock again.
			for _, s := range servers {
				if err := s.client.Set(ctx, flushed.Keys().Epoch, "another-process", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			moved := grant()
			if moved.Token() <= flushed.Token() || moved.CounterMissing() || !moved.ClockFloored() {
				t.Fatalf("after another process: token %s after %s, counter missing %v, clock floored %v",
					moved.Token(), flushed.Token(), moved.CounterMissing(), moved.ClockFloored())
			}
			if next := grant(); next.Token() != moved.Token()+1 || next.ClockFloored() {
				t.Fatalf("then: token %s after %s, clock floored %v", next.Token(), moved.Token(), next.ClockFloored())
			}
		})
	}
}

func TestTokensStartAboveTheFloor(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			st := openStore(t, k.url(startRedis(t, k.servers)))
			// Above the clock in µs (the floor a new lock's token starts from) until the year 5138.
			const high fencepost.Token = 100_000_000_000_000_000
			floor := func(context.Context, string) (fencepost.Token, error) { return high, nil }
			l := mustAcquire(t, st, "floored", Options{Floor: floor})
			if l.Token() != high+1 {
				t.Fatalf("token %s, want %s", l.Token(), high+1)
			}
		})
	}
}

func TestMutualExclusionAndStrictlyIncreasingTokensAcrossManyAcquisitions(t *testing.T) {
	const workers, rounds = 4, 25
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			url := k.url(startRedis(t, k.servers))
			var inside, overlaps atomic.Int32
			var mu sync.Mutex
			var tokens []fencepost.Token
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for range workers {
				st := openStore(t, url) // one store per worker, as separate processes would have
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						l, err := st.Acquire(context.Background(), "contended", Options{TTL: time.Second, Wait: 20 * time.Second})
						if err != nil {
							errs <- err
							return
						}
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						mu.Lock()
						tokens = append(tokens, l.Token())
						mu.Unlock()
						time.Sleep(time.Millisecond)
						inside.Add(-1)
						if err := l.Release(); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if overlaps.Load() != 0 {
				t.Fatalf("%d overlaps", overlaps.Load())
			}
			t.Logf("%d grants, tokens %s..%s", len(tokens), tokens[0], tokens[len(tokens)-1])
			if len(tokens) != workers*rounds {
				t.Fatalf("%d grants", len(tokens))
			}
			for i := 1; i < len(tokens); i++ {
				if tokens[i] <= tokens[i-1] {
					t.Fatalf("token %s after %s (grant %d)", tokens[i], tokens[i-1], i)
				}
			}
		})
	}
}

func TestALockIsLostAtOnceWhenItsKeyIsDeletedOrTaken(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			servers := startRedis(t, k.servers)
			st := openStore(t, k.url(servers))
			ctx := context.Background()
			const ttl = 900 * time.Millisecond // renews every 300 ms
			majority := servers[:Quorum(len(servers))]

			deleted := mustAcquire(t, st, "deleted", Options{TTL: ttl})
			for _, s := range majority {
				s.client.Del(ctx, deleted.Keys().Holder)
			}
			waitDone(t, deleted, RenewEvery(ttl)+200*time.Millisecond)
			if !errors.Is(deleted.Err(), fencepost.ErrLost) || !strings.Contains(deleted.Err().Error(), "gone or held by another owner") || deleted.Held() {
				t.Fatalf("deleted: %v", deleted.Err())
			}
			if e := <-deleted.Events(); e.Type != "lost" || e.Token != deleted.Token() {
				t.Fatalf("event %+v", e)
			}

			taken := mustAcquire(t, st, "taken", Options{TTL: ttl})
			for _, s := range majority {
				s.client.Set(ctx, taken.Keys().Holder, "someone-else", 10*time.Second)
			}
			waitDone(t, taken, RenewEvery(ttl)+200*time.Millisecond)
			if !errors.Is(taken.Err(), fencepost.ErrLost) {
				t.Fatalf("taken: %v", taken.Err())
			}
			// Release after a loss compares and deletes: someone else's key stays.
			if err := taken.Release(); err != nil || servers[0].client.Get(ctx, taken.Keys().Holder).Val() != "someone-else" {
				t.Fatalf("release after the loss: %v", err)
			}
		})
	}
}

func TestALockEndsAtItsValidityWhenRenewsGetNoAnswer(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			servers := startRedis(t, k.servers)
			st := openStore(t, k.url(servers))
			const ttl = 600 * time.Millisecond // validity 592 ms; renews every 200 ms
			sent := time.Now()
			l := mustAcquire(t, st, "paused", Options{TTL: ttl})
			paused := servers[:Quorum(len(servers))]
			for _, s := range paused {
				s.pause()
			}
			defer func() {
				for _, s := range paused {
					s.resume()
				}
			}()
			waitDone(t, l, 2*time.Second)
			if at := time.Since(sent); at < Validity(ttl)-50*time.Millisecond || at > Validity(ttl)+lapseCheck+100*time.Millisecond {
				t.Fatalf("lost %s after the acquire was sent, validity %s", at, Validity(ttl))
			}
			if !errors.Is(l.Err(), fencepost.ErrLost) || !strings.Contains(l.Err().Error(), "validity") || l.Held() {
				t.Fatalf("err %v", l.Err())
			}
		})
	}
}

func TestWaitersAreWokenByARelease(t *testing.T) {
	// The backoff at its longest, so that only the release notification can wake the waiter soon.
	defer func(j func() float64) { jitter = j }(jitter)
	jitter = func() float64 { return 0.999 }
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			url := k.url(startRedis(t, k.servers))
			holder := mustAcquire(t, openStore(t, url), "wake", Options{TTL: 10 * time.Second})
			got := make(chan *Lock, 1)
			errs := make(chan error, 1)
			waiterStore := openStore(t, url)
			go func() {
				l, err := waiterStore.Acquire(context.Background(), "wake", Options{Wait: 10 * time.Second})
				if err != nil {
					errs <- err
					return
				}
				got <- l
			}()
			time.Sleep(1500 * time.Millisecond) // the waiter is deep in its backoff (800, 1600 ms ...)
			released := time.Now()
			if err := holder.Release(); err != nil {
				t.Fatal(err)
			}
			select {
			case l := <-got:
				defer l.Release()
				if d := time.Since(released); d > 150*time.Millisecond {
					t.Fatalf("the waiter took %s after the release", d)
				}
				if l.Token() <= holder.Token() {
					t.Fatalf("token %s after %s", l.Token(), holder.Token())
				}
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(3 * time.Second):
				t.Fatal("the waiter was not woken")
			}
		})
	}
}

func TestRedlockRaisesTheTokenOnTheMajorityWhenItsCountersDisagree(t *testing.T) {
	servers := startRedis(t, 5)
	st := openStore(t, redlockURL(servers))
	ctx := context.Background()
	keys, _ := LockKeys("", "raised")
	// Master 0's counter is far above the others' (each floors a new counter at its own clock, so
	// on a new lock the masters disagree by microseconds anyway).
	const ahead fencepost.Token = 100_000_000_000_000_000
	seedCounter(t, servers[0], keys, ahead.String())
	l := mustAcquire(t, st, "raised", Options{})
	if l.Token() != ahead+1 || l.CounterMissing() || !l.ClockFloored() {
		t.Fatalf("token %s, counter missing %v, clock floored %v: want %s (the largest of the majority), floored on the others",
			l.Token(), l.CounterMissing(), l.ClockFloored(), ahead+1)
	}
	for i, s := range servers {
		if v := s.client.Get(ctx, keys.Counter).Val(); v != l.Token().String() {
			t.Errorf("master %d counter %q after the raise, want %s", i, v, l.Token())
		}
	}
	_ = l.Release()
	// Raised, the masters agree: the next grant is one more everywhere, in one round trip.
	next := mustAcquire(t, st, "raised", Options{})
	if next.Token() != l.Token()+1 || next.ClockFloored() {
		t.Fatalf("next grant: token %s after %s, clock floored %v", next.Token(), l.Token(), next.ClockFloored())
	}
}

func TestRedlockGrantsWithTwoMastersDownButNotWithThree(t *testing.T) {
	servers := startRedis(t, 5)
	st := openStore(t, redlockURL(servers))
	servers[3].stop()
	servers[4].stop()
	l := mustAcquire(t, st, "minority-down", Options{TTL: time.Second})
	if !l.Held() {
		t.Fatal("not held")
	}
	time.Sleep(500 * time.Millisecond) // a renew or more on the three left
	if !l.Held() {
		t.Fatalf("lost with three of five masters: %v", l.Err())
	}
	if err := l.Release(); err != nil {
		t.Logf("release with two masters down: %v", err)
	}
	servers[2].stop()
	_, err := st.Acquire(context.Background(), "minority-down", Options{Wait: time.Second})
	if !errors.Is(err, fencepost.ErrNotAcquired) || !strings.Contains(err.Error(), "2 of 5 masters granted, 3 needed") {
		t.Fatalf("with three masters down: %v", err)
	}
}

func TestASingleRedisDownIsNotAcquiredInTime(t *testing.T) {
	srv := startRedis(t, 1)[0]
	st := openStore(t, srv.url)
	srv.stop()
	start := time.Now()
	_, err := st.Acquire(context.Background(), "down", Options{Wait: 500 * time.Millisecond})
	if !errors.Is(err, fencepost.ErrNotAcquired) || time.Since(start) > 2*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
}

func TestARedlockWaiterIsNotWokenByTheReleasesOfItsOwnFailedAttempts(t *testing.T) {
	// Another owner holds the key on masters 0-2 for 1 s; masters 3 and 4 are free. Each attempt
	// takes 3 and 4 (advancing their counters), fails, and gives them back with a release that
	// publishes — its own owner id, which must not wake it, or it would retry at once for the
	// whole second.
	servers := startRedis(t, 5)
	st := openStore(t, redlockURL(servers))
	ctx := context.Background()
	keys, _ := LockKeys("", "split")
	for _, s := range servers {
		seedCounter(t, s, keys, "0") // master 4's counter then counts the attempts
	}
	for _, s := range servers[:3] {
		s.client.Set(ctx, keys.Holder, "someone-else", time.Second)
	}
	l := mustAcquire(t, st, "split", Options{Wait: 5 * time.Second})
	attempts, _ := servers[4].client.Get(ctx, keys.Counter).Int()
	if attempts > 20 {
		t.Fatalf("%d attempts in about a second: the waiter woke itself", attempts)
	}
	t.Logf("token %s after %d attempts", l.Token(), attempts)
}

func TestRedlockWaitersAreNotWokenByEachOthersFailedAttempts(t *testing.T) {
	// Another owner holds the key on masters 0-2 for 1 s. Two waiters take turns at masters 3 and
	// 4: each failed attempt gives them back with a release that publishes on two masters — not a
	// quorum, so not the holder's release, and the other waiter must not retry at once on it.
	defer func(j func() float64) { jitter = j }(jitter)
	jitter = func() float64 { return 0.5 }
	servers := startRedis(t, 5)
	url := redlockURL(servers)
	ctx := context.Background()
	keys, _ := LockKeys("", "three")
	for _, s := range servers {
		seedCounter(t, s, keys, "0") // master 4's counter then counts the attempts
	}
	for _, s := range servers[:3] {
		s.client.Set(ctx, keys.Holder, "someone-else", time.Second)
	}
	var wg sync.WaitGroup
	for range 2 {
		st := openStore(t, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := st.Acquire(ctx, "three", Options{Wait: 5 * time.Second})
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(50 * time.Millisecond)
			_ = l.Release()
		}()
	}
	wg.Wait()
	attempts, _ := servers[4].client.Get(ctx, keys.Counter).Int()
	if attempts > 40 {
		t.Fatalf("%d attempts on master 4 in about a second: the waiters woke each other", attempts)
	}
	t.Logf("%d attempts on master 4", attempts)
}
