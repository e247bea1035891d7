// Package fencepost is the Go client of fencepost's agent: it asks the agent sidecar in the
// same pod for a lock over its local HTTP API, hands the application the lock's fencing token as
// an exact integer, tells it when the lock is lost, and releases it.
//
// A lock is a DistributedLock in the pod's namespace; the agent (`fencepost agent --lock NAME`)
// holds the pod's session and renews the lock's Lease. This package adds no protocol of its own:
// it speaks the agent's documented API (docs/agent.md, "Local HTTP API"; the OpenAPI document is
// served at /openapi.json).
//
//	lock, err := fencepost.Acquire(ctx, "billing", fencepost.Options{Wait: 30 * time.Second})
//	if err != nil { ... }                  // errors.Is(err, fencepost.ErrNotAcquired), ...
//	defer lock.Release()
//	ctx := lock.Context()                  // cancelled the moment the lock is lost
//	guard.Write(ctx, "orders:42", lock.Token(), value)
//
// Belief is bounded by the clock, as in the TypeScript library: Held reports false once the time
// the agent gave for the term has passed since this process asked — measured on the monotonic
// clock and on the wall clock, whichever ran further (a VM pause stops the former). A process
// paused between Held and its write still writes with its old token: only the resource can refuse
// it, which is what the guards in package guard do.
package fencepost
