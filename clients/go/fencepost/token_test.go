package fencepost

import (
	"encoding/json"
	"errors"
	"testing"
)

type tokenVectors struct {
	MaxToken string `json:"maxToken"`
	Parse    []struct {
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
		Valid bool            `json:"valid"`
		Value string          `json:"value"`
	} `json:"parse"`
	Compare []struct {
		A     string `json:"a"`
		B     string `json:"b"`
		Order int    `json:"order"`
	} `json:"compare"`
}

func TestTokenVectors(t *testing.T) {
	var v tokenVectors
	readVectors(t, "tokens.json", &v)
	if MaxToken.String() != v.MaxToken {
		t.Fatalf("MaxToken = %s, vectors say %s", MaxToken, v.MaxToken)
	}
	for _, c := range v.Parse {
		t.Run("parse "+c.Name, func(t *testing.T) {
			// Through JSON, as tokens arrive from the agent: only a string may be a token.
			var tok Token
			err := json.Unmarshal(c.Input, &tok)
			if c.Valid != (err == nil) {
				t.Fatalf("UnmarshalJSON(%s): valid=%v, err=%v", c.Input, c.Valid, err)
			}
			if err != nil && !errors.Is(err, ErrMalformedToken) {
				t.Fatalf("UnmarshalJSON(%s): %v does not wrap ErrMalformedToken", c.Input, err)
			}
			if c.Valid && tok.String() != c.Value {
				t.Fatalf("UnmarshalJSON(%s) = %s, want %s", c.Input, tok, c.Value)
			}
			// And as a plain string, where the input is one.
			var s string
			if json.Unmarshal(c.Input, &s) != nil {
				return
			}
			got, err := ParseToken(s)
			if c.Valid != (err == nil) || (c.Valid && got.String() != c.Value) {
				t.Fatalf("ParseToken(%q) = %s, %v; want valid=%v value %s", s, got, err, c.Valid, c.Value)
			}
		})
	}
	for _, c := range v.Compare {
		t.Run("compare "+c.A+" "+c.B, func(t *testing.T) {
			a, errA := ParseToken(c.A)
			b, errB := ParseToken(c.B)
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			if got := a.Compare(b); got != c.Order {
				t.Fatalf("Compare = %d, want %d", got, c.Order)
			}
			if (a < b) != (c.Order < 0) || (a == b) != (c.Order == 0) {
				t.Fatalf("the operators disagree with order %d", c.Order)
			}
		})
	}
}

func TestTokenOutOfRangeIsRefusedEverywhere(t *testing.T) {
	over := MaxToken + 1 // a Token made by conversion, not by ParseToken
	if over.Valid() {
		t.Fatal("2^63 is valid")
	}
	if _, err := over.Int64(); !errors.Is(err, ErrMalformedToken) {
		t.Fatalf("Int64 of 2^63: %v", err)
	}
	if _, err := json.Marshal(over); !errors.Is(err, ErrMalformedToken) {
		t.Fatalf("MarshalJSON of 2^63: %v", err)
	}
	if i, err := MaxToken.Int64(); err != nil || i != 1<<63-1 {
		t.Fatalf("Int64 of MaxToken = %d, %v", i, err)
	}
	b, err := json.Marshal(MaxToken)
	if err != nil || string(b) != `"9223372036854775807"` {
		t.Fatalf("MarshalJSON(MaxToken) = %s, %v", b, err)
	}
}
