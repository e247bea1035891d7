package fencepost

import (
	"errors"
	"fmt"
	"strings"
)

// The errors a lock reports; test them with errors.Is.
var (
	// ErrNotAcquired: the lock was not granted within the wait (423 not-granted), or another
	// pod holds it and the caller asked not to wait (423 held).
	ErrNotAcquired = errors.New("fencepost: lock not acquired")
	// ErrAlreadyDone: the run id was already completed by some holder (409 already-done). Do not
	// run it.
	ErrAlreadyDone = errors.New("fencepost: run already done")
	// ErrLost: the term ended without a release — its time ran out, the agent said lost, or it no
	// longer holds the lock with this token (409 not-held). Stop writing.
	ErrLost = errors.New("fencepost: lock lost")
	// ErrReleased: the lock was released by this process (the cause of its Context then).
	ErrReleased = errors.New("fencepost: lock released")
)

// problemBase prefixes every problem type of the agent's API.
const problemBase = "https://fencepost.io/problems/"

// ProblemError is an RFC 9457 problem the agent answered with (application/problem+json).
// errors.Is matches it to ErrNotAcquired (not-granted, held), ErrAlreadyDone (already-done) and
// ErrLost (not-held).
type ProblemError struct {
	// Status is the HTTP status.
	Status int `json:"status"`
	// Type is the problem type URI, https://fencepost.io/problems/<name>.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Lock, Holder, RunID and Snapshot are the extension members some types carry.
	Lock     string    `json:"lock,omitempty"`
	Holder   string    `json:"holder,omitempty"`
	RunID    string    `json:"runId,omitempty"`
	Snapshot *Snapshot `json:"snapshot,omitempty"`
}

// Name is the problem type without its base URI: "not-granted", "held", "already-done", ...
func (e *ProblemError) Name() string { return strings.TrimPrefix(e.Type, problemBase) }

func (e *ProblemError) Error() string {
	return fmt.Sprintf("fencepost agent: %d %s: %s", e.Status, e.Name(), e.Detail)
}

// Is makes errors.Is(err, ErrNotAcquired) and the like true for the matching problem types.
func (e *ProblemError) Is(target error) bool {
	switch e.Name() {
	case "not-granted", "held":
		return target == ErrNotAcquired
	case "already-done":
		return target == ErrAlreadyDone
	case "not-held":
		return target == ErrLost
	}
	return false
}
