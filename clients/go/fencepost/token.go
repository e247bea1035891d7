package fencepost

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// Token is a fencing token: an integer in [0, MaxToken], strictly larger for every new grant of
// a lock. On the wire it is a canonical decimal string; it is never a float (a float64 is exact
// only up to 2^53). Compare tokens with <, == and > on the Token values.
type Token uint64

// MaxToken (protocol_gen.go) is the largest token. ParseToken refuses anything above it, so every
// Token it returns also fits an int64.

// ErrMalformedToken is wrapped by every error ParseToken and Token.UnmarshalJSON return.
var ErrMalformedToken = errors.New("malformed fencing token")

var canonicalDecimal = regexp.MustCompile(`^(0|[1-9][0-9]{0,18})$`)

// ParseToken parses a canonical decimal token: ASCII digits only, no sign, no leading zero, no
// space, at most MaxToken — so that one token has exactly one spelling (src/protocol/token.ts is
// the reference). Errors wrap ErrMalformedToken.
func ParseToken(s string) (Token, error) {
	if !canonicalDecimal.MatchString(s) {
		return 0, fmt.Errorf("%w: must be a canonical non-negative decimal integer, got %q", ErrMalformedToken, truncate(s, 40))
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || Token(v) > MaxToken {
		return 0, fmt.Errorf("%w: %s exceeds the maximum %d", ErrMalformedToken, s, uint64(MaxToken))
	}
	return Token(v), nil
}

// Valid reports whether t is at most MaxToken (a Token made by conversion may not be).
func (t Token) Valid() bool { return t <= MaxToken }

// String is the canonical decimal spelling.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// Int64 returns t as an int64, exact for every valid token (for SQL bigint parameters).
func (t Token) Int64() (int64, error) {
	if !t.Valid() {
		return 0, fmt.Errorf("%w: %d exceeds the maximum %d", ErrMalformedToken, uint64(t), uint64(MaxToken))
	}
	return int64(t), nil
}

// Compare returns -1, 0 or +1 as t is below, equal to or above u.
func (t Token) Compare(u Token) int {
	switch {
	case t < u:
		return -1
	case t > u:
		return 1
	}
	return 0
}

// MarshalJSON writes the token as a JSON string.
func (t Token) MarshalJSON() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("%w: %d exceeds the maximum %d", ErrMalformedToken, uint64(t), uint64(MaxToken))
	}
	return json.Marshal(t.String())
}

// UnmarshalJSON reads a token from a JSON string only: a JSON number is refused, since it may
// have passed through a float64 on its way.
func (t *Token) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w: must be a JSON string, got %s", ErrMalformedToken, truncate(string(b), 40))
	}
	v, err := ParseToken(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
