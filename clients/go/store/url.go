package store

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Endpoint is one host and port.
type Endpoint struct {
	Host string
	Port int
}

// String is host:port ([host]:port for an IPv6 address).
func (e Endpoint) String() string {
	if strings.Contains(e.Host, ":") {
		return "[" + e.Host + "]:" + strconv.Itoa(e.Port)
	}
	return e.Host + ":" + strconv.Itoa(e.Port)
}

// Mode is how a Target is reached.
type Mode string

const (
	// Standalone is one Redis server (redis://, rediss://, and each master of redlock://).
	Standalone Mode = "standalone"
	// Sentinel is a Sentinel-managed master (redis+sentinel://).
	Sentinel Mode = "sentinel"
	// Cluster is a Redis Cluster (redis+cluster://).
	Cluster Mode = "cluster"
)

// Target is one Redis deployment, as parsed from a store URL.
type Target struct {
	Mode Mode
	// Endpoints: the server (Standalone), the Sentinels, or the Cluster's seed nodes.
	Endpoints []Endpoint
	// Master is the Sentinel master name (Sentinel only).
	Master string
	// DB is the database number (not for Cluster).
	DB int
	// TLS is true for rediss://.
	TLS bool
	// Username and Password come from the URL's user info; HasPassword tells an empty password
	// ("redis://u:@h") from none.
	Username    string
	Password    string
	HasPassword bool
}

// Kind is what a store URL names: one Redis deployment, or Redlock over N masters.
type Kind string

const (
	// KindRedis is redis://, rediss://, redis+sentinel:// or redis+cluster://.
	KindRedis Kind = "redis"
	// KindRedlock is redlock://.
	KindRedlock Kind = "redlock"
)

// URL is a parsed store URL.
type URL struct {
	Kind Kind
	// Targets: one for KindRedis, one per master (each Standalone) for KindRedlock.
	Targets []Target
	// Display is the URL with its password replaced by "***", for logs and errors.
	Display string
}

// URLError is a store URL refused by ParseURL. Its message names the option (What), the problem,
// and the URL with its password redacted — never the password.
type URLError struct {
	// What names the option that carried the URL ("--store", "store.Open(url)").
	What string
	// Problem is the message without the option's name and the URL.
	Problem string
	// URL is the refused URL, password redacted.
	URL string
}

func (e *URLError) Error() string {
	return fmt.Sprintf("%s: %s, got %s", e.What, e.Problem, strconv.Quote(e.URL))
}

var (
	urlShape = regexp.MustCompile(`(?i)^([a-z][a-z0-9+.-]*)://(?:([^@/?#]*)@)?([^/?#]*)(/[^?#]*)?([?#].*)?$`)
	hostName = regexp.MustCompile(`(?i)^(\[[0-9a-f:.]+\]|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$`)
	hostPort = regexp.MustCompile(`^(.*?)(?::([0-9]+))?$`)
	dbNumber = regexp.MustCompile(`^(0|[1-9][0-9]{0,3})$`)
	password = regexp.MustCompile(`(?i)^([a-z][a-z0-9+.-]*://[^:@/?#]*:)[^@/?#]*@`)
)

// Redact replaces the password of a URL's user info with "***".
func Redact(url string) string {
	return password.ReplaceAllString(url, "${1}***@")
}

// ParseURL parses a store URL; what names the option in errors (a *URLError). The forms, as the
// TypeScript library's (src/stores/url.ts; default port 6379, 26379 for Sentinels):
//
//	redis://[[user]:password@]host[:port][/db]            one Redis (rediss:// for TLS)
//	redis+sentinel://[[user]:password@]h1:p1,h2:p2/master[/db]
//	redis+cluster://[[user]:password@]h1:p1,h2:p2
//	redlock://[[user]:password@]h1:p1,h2:p2,h3:p3[/db]    Redlock over N >= 3 distinct masters
//
// Nothing connects here.
func ParseURL(url, what string) (URL, error) {
	display := Redact(url)
	fail := func(problem string) (URL, error) {
		return URL{}, &URLError{What: what, Problem: problem, URL: display}
	}
	m := urlShape.FindStringSubmatch(url)
	if m == nil {
		return fail("must be a URL such as redis://127.0.0.1:6379 or redlock://h1:6379,h2:6379,h3:6379")
	}
	scheme := strings.ToLower(m[1])
	username, pass, hasPass, problem := parseAuth(m[2])
	if problem != "" {
		return fail(problem)
	}
	path := strings.TrimPrefix(m[4], "/")
	if m[5] != "" {
		return fail("takes no query or fragment")
	}
	defaultPort := 6379
	if scheme == "redis+sentinel" {
		defaultPort = 26379
	}
	var endpoints []Endpoint
	for _, h := range strings.Split(m[3], ",") {
		e, problem := parseEndpoint(h, defaultPort)
		if problem != "" {
			return fail(problem)
		}
		endpoints = append(endpoints, e)
	}
	db := func(text string) (int, string) {
		if text == "" {
			return 0, ""
		}
		if !dbNumber.MatchString(text) {
			return 0, fmt.Sprintf("database must be a number from 0 to 9999, not %s", strconv.Quote(text))
		}
		n, _ := strconv.Atoi(text)
		return n, ""
	}
	target := Target{Username: username, Password: pass, HasPassword: hasPass}
	switch scheme {
	case "redis", "rediss":
		if strings.Contains(path, "/") {
			return fail("the path is the database number only")
		}
		if len(endpoints) != 1 {
			return fail(scheme + ":// takes one host; for several masters use redlock://")
		}
		n, problem := db(path)
		if problem != "" {
			return fail(problem)
		}
		target.Mode, target.Endpoints, target.DB, target.TLS = Standalone, endpoints, n, scheme == "rediss"
		return URL{Kind: KindRedis, Targets: []Target{target}, Display: display}, nil
	case "redis+sentinel":
		parts := strings.Split(path, "/")
		if parts[0] == "" {
			return fail("redis+sentinel:// needs the master name as its path: redis+sentinel://h1,h2/mymaster")
		}
		if len(parts) > 2 {
			return fail("the path is /master[/db]")
		}
		dbText := ""
		if len(parts) == 2 {
			dbText = parts[1]
		}
		n, problem := db(dbText)
		if problem != "" {
			return fail(problem)
		}
		target.Mode, target.Endpoints, target.Master, target.DB = Sentinel, endpoints, parts[0], n
		return URL{Kind: KindRedis, Targets: []Target{target}, Display: display}, nil
	case "redis+cluster":
		if path != "" {
			return fail("redis+cluster:// takes no path (a cluster has one database)")
		}
		target.Mode, target.Endpoints = Cluster, endpoints
		return URL{Kind: KindRedis, Targets: []Target{target}, Display: display}, nil
	case "redlock":
		if strings.Contains(path, "/") {
			return fail("the path is the database number only")
		}
		if len(endpoints) < MinRedlockMasters {
			return fail(fmt.Sprintf("redlock:// needs at least %d independent masters (5 is usual), not %d", MinRedlockMasters, len(endpoints)))
		}
		seen := map[string]bool{}
		for _, e := range endpoints {
			key := fmt.Sprintf("%s:%d", strings.ToLower(e.Host), e.Port)
			if seen[key] {
				return fail(fmt.Sprintf("master %s is named twice; Redlock's majority needs distinct masters", key))
			}
			seen[key] = true
		}
		n, problem := db(path)
		if problem != "" {
			return fail(problem)
		}
		u := URL{Kind: KindRedlock, Display: display}
		for _, e := range endpoints {
			t := target
			t.Mode, t.Endpoints, t.DB = Standalone, []Endpoint{e}, n
			u.Targets = append(u.Targets, t)
		}
		return u, nil
	}
	return fail(fmt.Sprintf("scheme %s:// is not a store; use redis://, rediss://, redis+sentinel://, redis+cluster:// or redlock://", scheme))
}

func parseAuth(info string) (username, pass string, hasPass bool, problem string) {
	if info == "" {
		return "", "", false, ""
	}
	user, pw, hasPass := strings.Cut(info, ":")
	var err error
	if username, err = decodeUserInfo(user); err != nil {
		return "", "", false, "the user info is not valid percent-encoding"
	}
	if pass, err = decodeUserInfo(pw); err != nil {
		return "", "", false, "the user info is not valid percent-encoding"
	}
	return username, pass, hasPass, ""
}

// decodeUserInfo is JavaScript's decodeURIComponent: %XX escapes only ("+" stays "+"), and the
// result must be UTF-8.
func decodeUserInfo(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("bad escape")
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", err
		}
		b.WriteByte(byte(v))
		i += 2
	}
	out := b.String()
	if !utf8.ValidString(out) {
		return "", fmt.Errorf("not UTF-8")
	}
	return out, nil
}

func parseEndpoint(text string, defaultPort int) (Endpoint, string) {
	if text == "" {
		return Endpoint{}, "a host is missing"
	}
	m := hostPort.FindStringSubmatch(text)
	host := m[1]
	if !hostName.MatchString(host) {
		return Endpoint{}, fmt.Sprintf("%s is not a host name or address", strconv.Quote(host))
	}
	port := defaultPort
	if m[2] != "" {
		p, err := strconv.Atoi(m[2])
		if err != nil || p < 1 || p > 65535 {
			return Endpoint{}, fmt.Sprintf("port %s is not in 1..65535", m[2])
		}
		port = p
	}
	if strings.HasPrefix(host, "[") {
		host = host[1 : len(host)-1]
	}
	return Endpoint{Host: host, Port: port}, ""
}
