package store

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
)

// conformanceDir holds the vectors and the Lua scripts every client shares (clients/conformance).
var conformanceDir = filepath.Join("..", "..", "conformance")

// storeVectors is clients/conformance/store.json, the parts a client can check.
type storeVectors struct {
	Keys struct {
		Vectors []struct {
			Namespace, Name, Counter, Holder, Epoch, Channel string
		}
		Invalid []string
	}
	Scripts      map[string]json.RawMessage
	OwnerVectors []struct {
		Owner string
		Pod   *struct{ Name, UID string }
	}
	EpochVectors []struct {
		Name    string
		Counter *string
		Epoch   *string
		// RecordedFailover follows the recorded epoch after '@'; Failover is the script's ARGV[4].
		RecordedFailover *string
		Failover         *string
		Floor            string
		Token            string
		EpochChanged     int64
		Error            bool
	}
	Timing struct {
		TTLMs struct {
			Min, Max, Default int64
		} `json:"ttlMs"`
		Vectors []struct {
			TTLMs        int64 `json:"ttlMs"`
			DriftMs      int64 `json:"driftMs"`
			RenewEveryMs int64 `json:"renewEveryMs"`
		}
	}
}

func readStoreVectors(t *testing.T) storeVectors {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(conformanceDir, "store.json"))
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var v storeVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("store.json: %v", err)
	}
	return v
}

func TestKeysAreTheConformanceKeys(t *testing.T) {
	v := readStoreVectors(t)
	if len(v.Keys.Vectors) == 0 {
		t.Fatal("store.json has no key vectors")
	}
	for _, c := range v.Keys.Vectors {
		got, err := LockKeys(c.Namespace, c.Name)
		if err != nil {
			t.Fatalf("%s/%s: %v", c.Namespace, c.Name, err)
		}
		want := Keys{Counter: c.Counter, Holder: c.Holder, Epoch: c.Epoch, Channel: c.Channel}
		if got != want {
			t.Errorf("%s/%s: keys %+v, want %+v", c.Namespace, c.Name, got, want)
		}
	}
	if k, _ := LockKeys("", "billing"); k.Counter != "fencepost:fence:default/billing" {
		t.Errorf("an empty namespace is not %q: %+v", DefaultNamespace, k)
	}
}

func TestInvalidNamesAreRefusedBeforeAnyKeyIsMade(t *testing.T) {
	v := readStoreVectors(t)
	for _, bad := range v.Keys.Invalid {
		if _, err := LockKeys("default", bad); err == nil || !strings.Contains(err.Error(), "lock name must be a DNS label") {
			t.Errorf("lock name %q: err %v", bad, err)
		}
		if bad == "" {
			continue // an empty namespace is the default one
		}
		if _, err := LockKeys(bad, "billing"); err == nil || !strings.Contains(err.Error(), "namespace must be a DNS label") {
			t.Errorf("namespace %q: err %v", bad, err)
		}
	}
}

func TestTimingIsTheConformanceTiming(t *testing.T) {
	v := readStoreVectors(t)
	if MinTTL.Milliseconds() != v.Timing.TTLMs.Min || MaxTTL.Milliseconds() != v.Timing.TTLMs.Max || DefaultTTL.Milliseconds() != v.Timing.TTLMs.Default {
		t.Errorf("TTL bounds %s..%s default %s, store.json %+v", MinTTL, MaxTTL, DefaultTTL, v.Timing.TTLMs)
	}
	for _, c := range v.Timing.Vectors {
		ttl := time.Duration(c.TTLMs) * time.Millisecond
		if got := Drift(ttl).Milliseconds(); got != c.DriftMs {
			t.Errorf("ttl %d ms: drift %d ms, want %d", c.TTLMs, got, c.DriftMs)
		}
		if got := RenewEvery(ttl).Milliseconds(); got != c.RenewEveryMs {
			t.Errorf("ttl %d ms: renew every %d ms, want %d", c.TTLMs, got, c.RenewEveryMs)
		}
		if got := Validity(ttl).Milliseconds(); got != c.TTLMs-c.DriftMs {
			t.Errorf("ttl %d ms: validity %d ms, want %d", c.TTLMs, got, c.TTLMs-c.DriftMs)
		}
		if err := checkTTL(ttl); err != nil {
			t.Errorf("ttl %d ms refused: %v", c.TTLMs, err)
		}
	}
	for _, bad := range []time.Duration{MinTTL - time.Millisecond, MaxTTL + time.Millisecond, 1500*time.Microsecond + time.Second} {
		if err := checkTTL(bad); err == nil {
			t.Errorf("ttl %s accepted", bad)
		}
	}
}

func TestOwnerIDsNameTheirPodAsTheVectorsSay(t *testing.T) {
	v := readStoreVectors(t)
	if len(v.OwnerVectors) == 0 {
		t.Fatal("store.json has no owner vectors")
	}
	for _, c := range v.OwnerVectors {
		pod, ok := PodOfOwner(c.Owner)
		switch {
		case c.Pod == nil && ok:
			t.Errorf("%q names pod %+v, want none", c.Owner, pod)
		case c.Pod != nil && (!ok || pod.Name != c.Pod.Name || pod.UID != c.Pod.UID):
			t.Errorf("%q: pod %+v %v, want %+v", c.Owner, pod, ok, *c.Pod)
		}
	}
	a, b := NewOwnerID(nil), NewOwnerID(nil)
	if a == b || len(a) != 32 || strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("owner ids %q, %q: want two different 128-bit lowercase hex values", a, b)
	}
	withPod := NewOwnerID(&Pod{Name: "web-0", UID: "4f6c1d2e"})
	if pod, ok := PodOfOwner(withPod); !ok || pod != (Pod{Name: "web-0", UID: "4f6c1d2e"}) {
		t.Errorf("owner %q: pod %+v %v", withPod, pod, ok)
	}
	if id := NewOwnerID(&Pod{Name: "Web", UID: "x"}); strings.Contains(id, "/") {
		t.Errorf("an invalid pod name was appended: %q", id)
	}
}

// TestEpochVectorsOnARealRedis runs store.json's epochVectors: the acquire script's token after
// an epoch change (the counter's jump, the clock floor, the 2^63-1 bound).
func TestEpochVectorsOnARealRedis(t *testing.T) {
	v := readStoreVectors(t)
	if len(v.EpochVectors) == 0 {
		t.Fatal("store.json has no epoch vectors")
	}
	srv := startRedis(t, 1)[0]
	ctx := context.Background()
	keys, err := LockKeys("", "vector")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.EpochVectors {
		t.Run(c.Name, func(t *testing.T) {
			srv.client.Del(ctx, keys.Holder, keys.Counter, keys.Epoch)
			id := replID(t, srv)
			if c.Counter != nil {
				srv.client.Set(ctx, keys.Counter, *c.Counter, 0)
			}
			if c.Epoch != nil {
				e := "another-replication-id"
				if *c.Epoch == "same" {
					e = id
				}
				srv.client.Set(ctx, keys.Epoch, e+at(c.RecordedFailover), 0)
			}
			now, err := srv.client.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			args := []any{"o", "1000", c.Floor}
			if c.Failover != nil {
				args = append(args, *c.Failover)
			}
			reply, err := acquireScript.Run(ctx, srv.client, []string{keys.Holder, keys.Counter, keys.Epoch}, args...).Slice()
			if c.Error {
				if err == nil || !strings.Contains(err.Error(), "overflow") || srv.client.Exists(ctx, keys.Holder).Val() != 0 {
					t.Fatalf("answer %v, error %v: want the overflow error and no holder key", reply, err)
				}
				return
			}
			if err != nil || len(reply) != 6 {
				t.Fatalf("answer %v, error %v", reply, err)
			}
			token, _ := reply[1].(string)
			got, err := fencepost.ParseToken(token)
			if err != nil {
				t.Fatal(err)
			}
			if c.Token == "clock" {
				if got <= fencepost.Token(now.UnixMicro()) {
					t.Errorf("token %s, want above the clock %d µs", got, now.UnixMicro())
				}
			} else if token != c.Token {
				t.Errorf("token %s, want %s", token, c.Token)
			}
			if changed, _ := reply[5].(int64); changed != c.EpochChanged {
				t.Errorf("epochChanged %d, want %d", changed, c.EpochChanged)
			}
			if e := srv.client.Get(ctx, keys.Epoch).Val(); e != id+at(c.Failover) {
				t.Errorf("epoch key %q, want %q", e, id+at(c.Failover))
			}
		})
	}
}

// at is what a failover count adds to the recorded epoch: "@" and the count, or nothing.
func at(failover *string) string {
	if failover == nil || *failover == "" {
		return ""
	}
	return "@" + *failover
}
