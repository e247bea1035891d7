// Package guard makes a resource refuse the writes of a holder whose fencing token is below the
// highest it has accepted: the Redis fenced write (one Lua script, the very file the TypeScript,
// Python and Java guards run: clients/conformance/redis-fenced-write.lua) and the SQL fenced
// update (database/sql; PostgreSQL statements, byte for byte those of the TypeScript guard).
//
// Both keep one mark per lock by default: once the holder of token N+1 has written, deleted or
// advanced anything under the lock, the holder of token N can do nothing — not write a key or row
// N+1 never touched, not insert a new row, not bring back a deleted one. An equal token is
// accepted (the same holder writing again in its term).
//
// The guards run where the resource is; they import nothing of Kubernetes or the agent.
package guard
