package store

import (
	"fmt"
	"time"
)

// The TTL's bounds and default, the renew retry, the timeouts and the waiter's backoff are in
// protocol_gen.go (clients/conformance/store.json "timing" and the TypeScript stores' values).

// subscribeWait bounds how long a refused waiter waits for its release subscription before it
// retries (a store slow to answer must not hold up the next attempt; the backoff finds a release
// it missed).
const subscribeWait = 250 * time.Millisecond

// checkTTL refuses a TTL outside [MinTTL, MaxTTL] or not a whole number of milliseconds.
func checkTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL || ttl%time.Millisecond != 0 {
		return fmt.Errorf("store: TTL must be a whole number of ms in [%s, %s], got %s", MinTTL, MaxTTL, ttl)
	}
	return nil
}

// Drift is the clock drift a grant of ttl allows for: floor(1 % of the TTL) + 2 ms (node-redlock's
// rule), in whole milliseconds.
func Drift(ttl time.Duration) time.Duration {
	return time.Duration(ttl.Milliseconds()/100+2) * time.Millisecond
}

// Validity is how long a grant or renew is trusted, counted from when its request was SENT (never
// from the answer): TTL − Drift.
func Validity(ttl time.Duration) time.Duration { return ttl - Drift(ttl) }

// RenewEvery is the watchdog's period: floor(TTL / 3) in whole milliseconds, so that two renews
// may fail before the key could expire.
func RenewEvery(ttl time.Duration) time.Duration {
	return time.Duration(ttl.Milliseconds()/3) * time.Millisecond
}

// renewOutcome is what one renew came back with.
type renewOutcome int

const (
	renewed  renewOutcome = iota
	notOwner              // the key is gone or another owner's
	failed                // no answer (down, timeout, too few masters)
)

// renewDecision is what the watchdog does after a renew: keep (trust until validUntil, next renew
// in next), retry in next, or lose (reason).
type renewDecision struct {
	lost       bool
	reason     string
	retry      bool
	next       time.Duration
	validUntil time.Duration // on the hold's elapsed clock
}

// afterRenew decides on a renew sent at sentAt that came back at now with outcome (all three on
// the hold's elapsed clock), while the grant was trusted until validUntil. A failure is retried
// until the validity passes; an answer that comes after the new validity would already have
// passed is worth nothing; trust never moves backwards. (src/stores/redis/timing.ts afterRenew.)
func afterRenew(outcome renewOutcome, errText string, sentAt, now, validUntil, ttl time.Duration) renewDecision {
	switch outcome {
	case notOwner:
		return renewDecision{lost: true, reason: "the key is gone or held by another owner"}
	case renewed:
		until := max(validUntil, sentAt+Validity(ttl))
		if now >= until {
			return renewDecision{lost: true, reason: "the renew was answered after its validity had passed"}
		}
		return renewDecision{validUntil: until, next: RenewEvery(ttl)}
	}
	if now >= validUntil {
		return renewDecision{lost: true, reason: "renews failed until the validity passed: " + errText}
	}
	return renewDecision{retry: true, next: min(RenewRetry, validUntil-now)}
}

// backoff is the delay before retry number attempt (0-based): uniform in
// [0, min(2 s, 50 ms·2^attempt)) ("full jitter"); random returns [0, 1).
func backoff(attempt int, random func() float64) time.Duration {
	ceiling := min(backoffCap, backoffBase<<min(attempt, 30))
	return time.Duration(random()*float64(ceiling.Milliseconds())) * time.Millisecond
}

// retryDelay is how long a waiter sleeps before its next try: the backoff, but no longer than the
// holder's key has left (heldFor, when Redis said; negative when not) plus 1 ms, nor than what is
// left of the caller's wait (left; negative: no bound).
func retryDelay(attempt int, random func() float64, heldFor time.Duration, haveHeldFor bool, left time.Duration, haveLeft bool) time.Duration {
	d := backoff(attempt, random)
	if haveHeldFor && heldFor >= 0 {
		d = min(d, heldFor+time.Millisecond)
	}
	if haveLeft {
		d = min(d, max(0, left))
	}
	return d
}
