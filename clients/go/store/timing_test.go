package store

import (
	"strings"
	"testing"
	"time"
)

func TestTheWatchdogDecidesOnARenewAsTheReferenceDoes(t *testing.T) {
	const ttl = 3 * time.Second // validity 2,968 ms, renew every 1 s
	ms := time.Millisecond
	for _, c := range []struct {
		name             string
		outcome          renewOutcome
		sent, now, until time.Duration
		want             renewDecision
	}{
		{"a renew answered in time extends trust from its send time", renewed, 1000 * ms, 1005 * ms, 2968 * ms,
			renewDecision{validUntil: 3968 * ms, next: time.Second}},
		{"trust never moves backwards", renewed, 0, 5 * ms, 2968 * ms,
			renewDecision{validUntil: 2968 * ms, next: time.Second}},
		{"a renew answered after its own validity is worth nothing", renewed, 1000 * ms, 3968 * ms, 2968 * ms,
			renewDecision{lost: true, reason: "the renew was answered after its validity had passed"}},
		{"the key gone or another owner's: lost at once", notOwner, 1000 * ms, 1001 * ms, 2968 * ms,
			renewDecision{lost: true, reason: "the key is gone or held by another owner"}},
		{"no answer: retried in 100 ms", failed, 1000 * ms, 1500 * ms, 2968 * ms,
			renewDecision{retry: true, next: 100 * ms}},
		{"no answer near the end: retried when the validity ends", failed, 1000 * ms, 2930 * ms, 2968 * ms,
			renewDecision{retry: true, next: 38 * ms}},
	} {
		if got := afterRenew(c.outcome, "boom", c.sent, c.now, c.until, ttl); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	d := afterRenew(failed, "connection refused", 0, 2968*ms, 2968*ms, ttl)
	if !d.lost || !strings.Contains(d.reason, "renews failed until the validity passed: connection refused") {
		t.Errorf("failures until the validity: %+v", d)
	}
}

func TestTheWaiterBacksOffWithFullJitter(t *testing.T) {
	top := func() float64 { return 0.999999 }
	zero := func() float64 { return 0 }
	for attempt, ceiling := range []time.Duration{50, 100, 200, 400, 800, 1600, 2000, 2000} {
		if got := backoff(attempt, top); got != (ceiling-1)*time.Millisecond {
			t.Errorf("attempt %d: %s, want just under %d ms", attempt, got, ceiling)
		}
		if got := backoff(attempt, zero); got != 0 {
			t.Errorf("attempt %d with random 0: %s", attempt, got)
		}
	}
	if got := backoff(1000, top); got != 1999*time.Millisecond {
		t.Errorf("a huge attempt number: %s", got)
	}
	if got := retryDelay(6, top, 30*time.Millisecond, true, 0, false); got != 31*time.Millisecond {
		t.Errorf("bounded by the holder key's PTTL + 1: %s", got)
	}
	if got := retryDelay(6, top, 0, false, 7*time.Millisecond, true); got != 7*time.Millisecond {
		t.Errorf("bounded by the caller's wait: %s", got)
	}
	if got := retryDelay(6, top, -1, true, -time.Second, true); got != 0 {
		t.Errorf("a wait already over: %s", got)
	}
}
