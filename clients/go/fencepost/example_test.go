package fencepost_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/fencepost/fencepost/clients/go/fencepost"
)

// agentForExample stands in for the agent sidecar (docs/agent.md, "Local HTTP API"): it grants
// the lock "billing" with token 215 and releases it. In a pod, Options.BaseURL stays empty and
// the client finds the agent at $FENCEPOST_AGENT_URL, else http://127.0.0.1:7370.
func agentForExample() *httptest.Server {
	const held = `{"lock":"billing","held":true,"token":"215","holder":"web-0","expiresInMs":15000,"state":"held"}`
	mux := http.NewServeMux()
	answer := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, body)
		}
	}
	mux.HandleFunc("POST /v1/locks/billing/acquire", answer(held))
	mux.HandleFunc("GET /v1/locks/billing", answer(held))
	mux.HandleFunc("POST /v1/locks/billing/release", answer(`{"lock":"billing","held":false,"state":"released"}`))
	mux.HandleFunc("GET /v1/locks/billing/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	return httptest.NewServer(mux)
}

// Acquire asks the agent for the lock and waits up to Wait for it; the token goes with every
// write to the guarded resource, and Context is cancelled the moment the lock is lost.
func ExampleAcquire() {
	agent := agentForExample()
	defer agent.Close()

	lock, err := fencepost.Acquire(context.Background(), "billing", fencepost.Options{
		BaseURL: agent.URL,
		Wait:    30 * time.Second,
	})
	if errors.Is(err, fencepost.ErrNotAcquired) {
		fmt.Println("another pod holds billing")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = lock.Release() }()
	fmt.Println(lock.Name(), "held with fencing token", lock.Token(), "- held now:", lock.Held())
	// Output: billing held with fencing token 215 - held now: true
}

// ParseToken accepts one spelling per token, so a token read back from storage compares exactly.
func ExampleParseToken() {
	t, err := fencepost.ParseToken("215")
	fmt.Println(t, err)
	_, err = fencepost.ParseToken("0215")
	fmt.Println(errors.Is(err, fencepost.ErrMalformedToken))
	// Output:
	// 215 <nil>
	// true
}
