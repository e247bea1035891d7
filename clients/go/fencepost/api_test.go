package fencepost

import (
	"encoding/json"
	"errors"
	"testing"
)

type apiVectors struct {
	Snapshots []struct {
		Name  string          `json:"name"`
		Body  json.RawMessage `json:"body"`
		Valid bool            `json:"valid"`
		Token *string         `json:"token"`
		Held  bool            `json:"held"`
	} `json:"snapshots"`
	Events []struct {
		Name  string          `json:"name"`
		Event string          `json:"event"`
		Body  json.RawMessage `json:"body"`
		Valid bool            `json:"valid"`
		Token string          `json:"token"`
	} `json:"events"`
	Problems []struct {
		Name   string          `json:"name"`
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
		Error  string          `json:"error"`
	} `json:"problems"`
}

func TestAPIResponseVectors(t *testing.T) {
	var v apiVectors
	readVectors(t, "api-responses.json", &v)
	for _, c := range v.Snapshots {
		t.Run("snapshot "+c.Name, func(t *testing.T) {
			var s Snapshot
			err := json.Unmarshal(c.Body, &s)
			if c.Valid != (err == nil) {
				t.Fatalf("valid=%v, err=%v", c.Valid, err)
			}
			if !c.Valid {
				return
			}
			if s.Held != c.Held {
				t.Fatalf("held = %v", s.Held)
			}
			switch {
			case c.Token == nil && s.Token != nil:
				t.Fatalf("token = %s, want none", s.Token)
			case c.Token != nil && (s.Token == nil || s.Token.String() != *c.Token):
				t.Fatalf("token = %v, want %s", s.Token, *c.Token)
			}
		})
	}
	for _, c := range v.Events {
		t.Run("event "+c.Name, func(t *testing.T) {
			var e Event
			err := json.Unmarshal(c.Body, &e)
			if c.Valid != (err == nil) {
				t.Fatalf("valid=%v, err=%v", c.Valid, err)
			}
			if c.Valid && (e.Type != c.Event || e.Token.String() != c.Token) {
				t.Fatalf("event = %+v", e)
			}
		})
	}
	sentinels := map[string]error{"not-acquired": ErrNotAcquired, "already-done": ErrAlreadyDone, "lost": ErrLost}
	for _, c := range v.Problems {
		t.Run("problem "+c.Name, func(t *testing.T) {
			err := decodeProblem(c.Status, "application/problem+json; charset=utf-8", c.Body)
			var p *ProblemError
			if !errors.As(err, &p) || p.Status != c.Status {
				t.Fatalf("decodeProblem = %v", err)
			}
			for name, sentinel := range sentinels {
				if errors.Is(err, sentinel) != (name == c.Error) {
					t.Fatalf("errors.Is(%s, %v) = %v, vectors say %s", p.Name(), sentinel, !(name == c.Error), c.Error)
				}
			}
		})
	}
}
