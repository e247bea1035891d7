package fencepost

import (
	"strings"
	"testing"
	"time"
)

func TestTheTermRunsByWhicheverClockRanFurther(t *testing.T) {
	for _, c := range []struct {
		name       string
		mono, wall time.Duration
		want       time.Duration
	}{
		{"both clocks agree", time.Second, time.Second, 5 * time.Second},
		{"a VM pause: the monotonic clock stood still for 10s while the wall clock ran", time.Second, 11 * time.Second, -5 * time.Second},
		{"the wall clock stepped back: the monotonic clock counts", 2 * time.Second, -time.Hour, 4 * time.Second},
		{"the wall clock stepped forward: the term ends early (safe)", time.Second, 7 * time.Second, -time.Second},
	} {
		if got := remaining(6*time.Second, c.mono, c.wall); got != c.want {
			t.Errorf("%s: remaining = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestSSEMessagesAreParsedAsTheAgentSendsThem(t *testing.T) {
	stream := "retry: 1000\n\n" +
		"event: state\nid: p-1\ndata: {\"lock\":\"billing\"}\n\n" +
		": ping\n\n" +
		"event: renewed\nid: p-2\ndata: {\"a\":\ndata: 1}\n\n" +
		"data: plain\n\n"
	var got []sseMessage
	if err := readSSE(strings.NewReader(stream), func(m sseMessage) { got = append(got, m) }); err != nil {
		t.Fatal(err)
	}
	want := []sseMessage{
		{id: "p-1", event: "state", data: `{"lock":"billing"}`},
		{id: "p-2", event: "renewed", data: "{\"a\":\n1}"},
		{id: "p-2", event: "message", data: "plain"},
	}
	if len(got) != len(want) {
		t.Fatalf("messages %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
