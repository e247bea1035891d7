package store

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParseURLAccepts(t *testing.T) {
	for _, c := range []struct {
		name, url string
		want      URL
	}{
		{"redis:// with the default port and database", "redis://127.0.0.1", URL{
			Kind: KindRedis, Display: "redis://127.0.0.1",
			Targets: []Target{{Mode: Standalone, Endpoints: []Endpoint{{"127.0.0.1", 6379}}}},
		}},
		{"rediss:// with credentials, port and database; the display hides the password", "rediss://app:s%3Fcret@redis.example:6380/2", URL{
			Kind: KindRedis, Display: "rediss://app:***@redis.example:6380/2",
			Targets: []Target{{Mode: Standalone, Endpoints: []Endpoint{{"redis.example", 6380}}, DB: 2, TLS: true, Username: "app", Password: "s?cret", HasPassword: true}},
		}},
		{"an IPv6 address in brackets", "redis://[::1]:7000", URL{
			Kind: KindRedis, Display: "redis://[::1]:7000",
			Targets: []Target{{Mode: Standalone, Endpoints: []Endpoint{{"::1", 7000}}}},
		}},
		{"redis+sentinel:// with the master name and database (Sentinel port default 26379)", "redis+sentinel://:pw@s1,s2:26380/mymaster/1", URL{
			Kind: KindRedis, Display: "redis+sentinel://:***@s1,s2:26380/mymaster/1",
			Targets: []Target{{Mode: Sentinel, Endpoints: []Endpoint{{"s1", 26379}, {"s2", 26380}}, Master: "mymaster", DB: 1, Password: "pw", HasPassword: true}},
		}},
		{"redis+cluster:// with seed nodes", "redis+cluster://n1:7000,n2:7001", URL{
			Kind: KindRedis, Display: "redis+cluster://n1:7000,n2:7001",
			Targets: []Target{{Mode: Cluster, Endpoints: []Endpoint{{"n1", 7000}, {"n2", 7001}}}},
		}},
	} {
		got, err := ParseURL(c.url, "o")
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestRedlockURLsNameEachMasterWithTheSharedCredentials(t *testing.T) {
	u, err := ParseURL("redlock://:pw@h1:1,h2:2,h3:3,h4:4,h5/3", "o")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range u.Targets {
		if m.Mode != Standalone || m.Password != "pw" || m.DB != 3 || len(m.Endpoints) != 1 {
			t.Errorf("master %+v", m)
		}
		names = append(names, m.Endpoints[0].String())
	}
	if u.Kind != KindRedlock || strings.Join(names, ",") != "h1:1,h2:2,h3:3,h4:4,h5:6379" {
		t.Errorf("kind %s, masters %v", u.Kind, names)
	}
}

func TestParseURLRefusesNamingTheOptionAndTheURL(t *testing.T) {
	for _, c := range []struct{ url, says string }{
		{"localhost:6379", "must be a URL such as redis://127.0.0.1:6379"},
		{"http://h:1", "scheme http:// is not a store"},
		{"redis://", "a host is missing"},
		{"redis://h:0", "port 0 is not in 1..65535"},
		{"redis://h:70000", "port 70000 is not in 1..65535"},
		{"redis://h:x", `"h:x" is not a host name or address`},
		{"redis://h1,h2", "redis:// takes one host; for several masters use redlock://"},
		{"redis://h/abc", `database must be a number from 0 to 9999, not "abc"`},
		{"redis://h?tls=1", "takes no query or fragment"},
		{"redis+sentinel://s1,s2", "needs the master name as its path"},
		{"redlock://h1,h2", "needs at least 3 independent masters (5 is usual), not 2"},
		{"redlock://h1,H1:6379,h3", "master h1:6379 is named twice; Redlock's majority needs distinct masters"},
		{"redlock://h1,,h3", "a host is missing"},
	} {
		_, err := ParseURL(c.url, "--store")
		var ue *URLError
		if !errors.As(err, &ue) {
			t.Errorf("%s: err %v, want a *URLError", c.url, err)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "--store: ") || !strings.Contains(msg, c.says) || !strings.HasSuffix(msg, ", got "+strconv.Quote(c.url)) {
			t.Errorf("%s: message %q, want it to say %q", c.url, msg, c.says)
		}
	}
}

func TestARefusedURLNeverShowsItsPassword(t *testing.T) {
	_, err := ParseURL("redis://u:hunter2@h:99999", "options.store")
	if err == nil || err.Error() != `options.store: port 99999 is not in 1..65535, got "redis://u:***@h:99999"` {
		t.Errorf("err %v", err)
	}
	if got := Redact("redlock://:hunter2@a,b,c"); got != "redlock://:***@a,b,c" {
		t.Errorf("Redact = %q", got)
	}
	if got := Redact("redis://h:1"); got != "redis://h:1" {
		t.Errorf("Redact = %q", got)
	}
}
