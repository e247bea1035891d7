package fencepost

import (
	"encoding/json"
	"fmt"
	"time"
)

// Snapshot is the agent's state of one lock (GET /v1/locks/NAME).
type Snapshot struct {
	Lock string `json:"lock"`
	// Held is true while this pod validly holds the lock, checked by the agent at this read.
	Held bool `json:"held"`
	// Token is the token of this pod's current or last term; nil when it never held the lock.
	Token *Token `json:"token,omitempty"`
	// Holder is the pod the lock's Lease names, whoever it is; empty when nobody holds it.
	Holder string `json:"holder,omitempty"`
	// ExpiresInMs is, for a held lock, the time left before the agent stops trusting it.
	ExpiresInMs *float64 `json:"expiresInMs,omitempty"`
	// State is waiting, confirming, held, lost, released or stopped.
	State string `json:"state"`
	// Draining is set during a planned handover: finish what is in flight, take no new work.
	Draining *Draining `json:"draining,omitempty"`
	// Permit is the Semaphore permit this pod holds; nil otherwise.
	Permit *int `json:"permit,omitempty"`
}

// Draining describes a planned handover under way.
type Draining struct {
	To           string  `json:"to"`
	DeadlineInMs float64 `json:"deadlineInMs"`
}

// ExpiresIn is ExpiresInMs as a duration (0 when absent).
func (s *Snapshot) ExpiresIn() time.Duration {
	if s.ExpiresInMs == nil {
		return 0
	}
	return time.Duration(*s.ExpiresInMs * float64(time.Millisecond))
}

// UnmarshalJSON checks the required fields (lock, held, state) and their types; a token must
// be a canonical decimal string.
func (s *Snapshot) UnmarshalJSON(b []byte) error {
	type plain Snapshot
	var required struct {
		Lock  *string          `json:"lock"`
		Held  *json.RawMessage `json:"held"`
		State *string          `json:"state"`
	}
	if err := json.Unmarshal(b, &required); err != nil {
		return fmt.Errorf("lock snapshot: %w", err)
	}
	if required.Lock == nil || required.Held == nil || required.State == nil {
		return fmt.Errorf("lock snapshot: lock, held and state are required")
	}
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("lock snapshot: %w", err)
	}
	*s = Snapshot(p)
	return nil
}

// Event is one event of a lock's stream (GET /v1/locks/NAME/events): granted, renewed, lost,
// released — and, passed through as they come, stopping, draining and handoverCancelled.
type Event struct {
	Type  string `json:"type"`
	Lock  string `json:"lock"`
	Token Token  `json:"token"`
	// Reason says why, for lost and released.
	Reason string `json:"reason,omitempty"`
	// ExpiresInMs is the new time left, for granted and renewed.
	ExpiresInMs *float64 `json:"expiresInMs,omitempty"`
	// To is the successor pod of a planned handover (draining).
	To string `json:"to,omitempty"`
}

// UnmarshalJSON checks the required fields (type, lock, token).
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event
	var required struct {
		Type  *string          `json:"type"`
		Lock  *string          `json:"lock"`
		Token *json.RawMessage `json:"token"`
	}
	if err := json.Unmarshal(b, &required); err != nil {
		return fmt.Errorf("lock event: %w", err)
	}
	if required.Type == nil || required.Lock == nil || required.Token == nil {
		return fmt.Errorf("lock event: type, lock and token are required")
	}
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("lock event: %w", err)
	}
	*e = Event(p)
	return nil
}
