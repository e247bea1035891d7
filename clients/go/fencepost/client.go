package fencepost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// DefaultBaseURL is where the agent serves its lock API by default (`--listen 127.0.0.1:7370`).
const DefaultBaseURL = "http://127.0.0.1:7370"

// BaseURLEnv names the environment variable that overrides DefaultBaseURL when Options.BaseURL
// is empty.
const BaseURLEnv = "FENCEPOST_AGENT_URL"

// agent is the HTTP side of one lock: requests to the agent and their answers.
type agent struct {
	base string
	lock string
	http *http.Client
}

func newAgent(lock string, o Options) (*agent, error) {
	base := o.BaseURL
	if base == "" {
		base = os.Getenv(BaseURLEnv)
	}
	if base == "" {
		base = DefaultBaseURL
	}
	if _, err := url.Parse(base); err != nil {
		return nil, fmt.Errorf("fencepost: base URL %q: %w", base, err)
	}
	if lock == "" {
		return nil, fmt.Errorf("fencepost: lock name is empty")
	}
	c := o.HTTPClient
	if c == nil {
		c = http.DefaultClient
	}
	return &agent{base: strings.TrimSuffix(base, "/"), lock: lock, http: c}, nil
}

// url is the lock's endpoint with a suffix ("", "/acquire", ...) and query.
func (a *agent) url(suffix string, q url.Values) string {
	u := a.base + "/v1/locks/" + url.PathEscape(a.lock) + suffix
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// do sends a request and decodes a 200 answer into a Snapshot; any other answer is a
// *ProblemError when the agent sent problem details, else a plain error.
//
// A POST carries Content-Type: application/json and the body {}: the agent refuses any other
// POST (415), so that a web page cannot send one across sites (docs/agent.md).
func (a *agent) do(ctx context.Context, method, u string) (*Snapshot, error) {
	var payload io.Reader
	if method == http.MethodPost {
		payload = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, u, payload)
	if err != nil {
		return nil, err
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fencepost agent: %s %s: %w", method, u, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fencepost agent: %s %s: %w", method, u, err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, decodeProblem(res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	var s Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("fencepost agent: %s %s: %w", method, u, err)
	}
	return &s, nil
}

// decodeProblem turns an error answer into a *ProblemError (or a plain error for a body that is
// not problem details).
func decodeProblem(status int, contentType string, body []byte) error {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/problem+json" {
		var p ProblemError
		if err := json.Unmarshal(body, &p); err == nil && p.Type != "" {
			if p.Status == 0 {
				p.Status = status
			}
			return &p
		}
	}
	return fmt.Errorf("fencepost agent: HTTP %d: %s", status, truncate(string(body), 200))
}
