// Package store holds fencepost locks directly in Redis or on Redlock masters, with no agent and
// no Kubernetes: the Go side of the TypeScript library's acquire({ store }) (src/stores), with the
// same keys, the same Lua scripts (clients/conformance, byte for byte) and the same token and
// timing rules (clients/conformance/store.json), so that a Go worker and a Node, Python or Java
// worker can contend for one lock.
//
//	lock, err := store.Acquire(ctx, "redis://127.0.0.1:6379", "billing", store.Options{Wait: 30 * time.Second})
//	if err != nil { ... }              // errors.Is(err, fencepost.ErrNotAcquired), ...
//	defer lock.Release()
//	ctx = lock.Context()               // cancelled the moment the lock is lost
//	guard.Write(ctx, "orders:42", lock.Token(), value)
//
// An app that takes locks again and again opens the store once (Open) and calls Store.Acquire.
//
// How a lock is held (docs/stores.md, "How a store lock is held"): the grant is one script that
// sets the holder key with its TTL and issues the token from the lock's counter; the grant is
// trusted until the time the request was SENT plus TTL − drift (1 % + 2 ms); a watchdog renews
// every third of the TTL, retries a renew that got no answer every 100 ms until the validity
// passes, and ends the lock at once when the key is gone or another owner's, and at the end of
// the validity whatever is in flight. Waiters subscribe to the lock's release channel and retry
// when a release is published, else after a full-jitter backoff.
//
// A store lock is an efficiency lock: a holder paused past its validity still believes until it
// resumes. Pass the token with every write and let a guard (package guard) refuse stale ones.
package store
