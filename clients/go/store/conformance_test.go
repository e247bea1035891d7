package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestEmbeddedScriptsAreTheSharedOnes: go:embed cannot reach outside the module, so the package
// embeds copies; each must be the shared file byte for byte (`go generate ./store` copies them
// again), and each script the concatenation store.json names.
func TestEmbeddedScriptsAreTheSharedOnes(t *testing.T) {
	for file, copy := range embedded {
		shared, err := os.ReadFile(filepath.Join(conformanceDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if *copy != string(shared) {
			t.Errorf("store/%s differs from clients/conformance/%s: run go generate ./store", file, file)
		}
	}
	v := readStoreVectors(t)
	for name, raw := range v.Scripts {
		var files []string
		if json.Unmarshal(raw, &files) != nil {
			continue // "rule"
		}
		if strings.Join(files, ",") != strings.Join(scriptFiles[name], ",") {
			t.Errorf("script %s: files %v, store.json says %v", name, scriptFiles[name], files)
		}
		want := ""
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(conformanceDir, f))
			if err != nil {
				t.Fatal(err)
			}
			want += string(b)
		}
		if compose(name) != want {
			t.Errorf("script %s is not the concatenation of %v", name, files)
		}
	}
	for name, s := range map[string]string{"acquire": acquireScript.Hash(), "renew": renewScript.Hash(), "release": releaseScript.Hash(), "redlockAcquire": redlockAcquireScript.Hash(), "redlockRaise": redlockRaiseScript.Hash()} {
		if s == "" || len(scriptFiles[name]) == 0 {
			t.Errorf("script %s: no files or no SHA", name)
		}
	}
}
