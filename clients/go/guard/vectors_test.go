package guard

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"
)

// The guard outcome vectors run against real servers: a redis-server at $FENCEPOST_TEST_REDIS_URL
// and a PostgreSQL at $FENCEPOST_TEST_POSTGRES_URL. test/integration/clients/go.test.ts starts
// both and runs these tests; without them they are skipped, saying so.

type guardVectors struct {
	Redis []struct {
		Name  string `json:"name"`
		Steps []struct {
			Op      string  `json:"op"`
			Key     string  `json:"key"`
			Token   string  `json:"token"`
			Value   *string `json:"value"`
			WriteID string  `json:"writeId"`
			Expect  string  `json:"expect"`
			Mark    string  `json:"mark"`
		} `json:"steps"`
	} `json:"redis"`
	SQL []struct {
		Name  string `json:"name"`
		Steps []struct {
			Op     string   `json:"op"`
			ID     int64    `json:"id"`
			Token  string   `json:"token"`
			Values []string `json:"values"`
			Expect string   `json:"expect"`
		} `json:"steps"`
	} `json:"sql"`
}

func serverURL(t *testing.T, env string) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		t.Skipf("%s is not set: the guard vectors need a real server (test/integration/clients/go.test.ts sets it)", env)
	}
	return u
}

func runID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestRedisGuardVectors(t *testing.T) {
	opts, err := redis.ParseURL(serverURL(t, "FENCEPOST_TEST_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	var v guardVectors
	readVectors(t, "guard-outcomes.json", &v)
	run := runID(t)
	for i, c := range v.Redis {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			lock := fmt.Sprintf("go-conformance-%s-%d", run, i)
			g, err := NewRedis(client, RedisOptions{Lock: lock})
			if err != nil {
				t.Fatal(err)
			}
			for n, s := range c.Steps {
				at := fmt.Sprintf("step %d (%s)", n, s.Op)
				key := lock + ":" + s.Key
				if s.Op == "get" {
					got, err := client.Get(ctx, key).Result()
					switch {
					case s.Value == nil && !errors.Is(err, redis.Nil):
						t.Fatalf("%s: %q, %v; want no key", at, got, err)
					case s.Value != nil && (err != nil || got != *s.Value):
						t.Fatalf("%s: %q, %v; want %q", at, got, err, *s.Value)
					}
					continue
				}
				token, err := fencepost.ParseToken(s.Token)
				if s.Expect == "token-error" {
					if !errors.Is(err, fencepost.ErrMalformedToken) {
						t.Fatalf("%s: ParseToken(%q) = %v, want ErrMalformedToken", at, s.Token, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", at, err)
				}
				var r RedisResult
				switch {
				case s.Op == "write" && s.WriteID != "":
					r, err = g.WriteOnce(ctx, key, token, *s.Value, s.WriteID)
				case s.Op == "write":
					r, err = g.Write(ctx, key, token, *s.Value)
				case s.Op == "delete":
					r, err = g.Delete(ctx, key, token)
				case s.Op == "advance":
					r, err = g.Advance(ctx, token)
				}
				if err != nil || string(r.Outcome) != s.Expect || r.Mark.String() != s.Mark {
					t.Fatalf("%s: %+v, %v; want %s, mark %s", at, r, err, s.Expect, s.Mark)
				}
				if mark, ok, err := g.HighWater(ctx, key); err != nil || !ok || mark.String() != s.Mark {
					t.Fatalf("%s: HighWater = %s, %v, %v; want %s", at, mark, ok, err, s.Mark)
				}
			}
		})
	}
	t.Run("a token above the maximum is refused before anything is sent", func(t *testing.T) {
		g, _ := NewRedis(client, RedisOptions{Lock: "go-conformance-" + run + "-max"})
		if _, err := g.Write(context.Background(), "k", fencepost.MaxToken+1, "v"); !errors.Is(err, fencepost.ErrMalformedToken) {
			t.Fatalf("Write(2^63) = %v", err)
		}
	})
}

func TestSQLGuardVectors(t *testing.T) {
	db, err := sql.Open("pgx", serverURL(t, "FENCEPOST_TEST_POSTGRES_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	fence, _ := FenceTableSQL(FenceTableSpec{})
	if _, err := db.ExecContext(ctx, fence); err != nil {
		t.Fatal(err)
	}
	var v guardVectors
	readVectors(t, "guard-outcomes.json", &v)
	run := runID(t)
	want := map[string]Outcome{"accepted": Applied, "stale": Stale, "not-found": NotFound}
	for i, c := range v.SQL {
		t.Run(c.Name, func(t *testing.T) {
			table := fmt.Sprintf("go_items_%s_%d", run, i)
			if _, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, v text)`); err != nil {
				t.Fatal(err)
			}
			g, err := NewSQL(db, SQLSpec{Table: table, IDColumn: "id", SetColumns: []string{"v"}, Lock: "go-conformance-" + table})
			if err != nil {
				t.Fatal(err)
			}
			for n, s := range c.Steps {
				at := fmt.Sprintf("step %d (%s)", n, s.Op)
				if s.Op == "read" {
					var got []string
					var val string
					err := db.QueryRowContext(ctx, `SELECT v FROM `+table+` WHERE id = $1`, s.ID).Scan(&val)
					if err == nil {
						got = []string{val}
					} else if !errors.Is(err, sql.ErrNoRows) {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, s.Values) {
						t.Fatalf("%s: row %v, want %v", at, got, s.Values)
					}
					continue
				}
				token, err := fencepost.ParseToken(s.Token)
				if s.Expect == "token-error" {
					if !errors.Is(err, fencepost.ErrMalformedToken) {
						t.Fatalf("%s: ParseToken(%q) = %v, want ErrMalformedToken", at, s.Token, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", at, err)
				}
				values := make([]any, len(s.Values))
				for i, x := range s.Values {
					values[i] = x
				}
				var o Outcome
				switch s.Op {
				case "write":
					o, err = g.Update(ctx, s.ID, token, values...)
				case "upsert":
					o, err = g.Upsert(ctx, s.ID, token, values...)
				case "delete":
					o, err = g.Delete(ctx, s.ID, token)
				case "advance":
					o, err = g.Advance(ctx, token)
				}
				if err != nil || o != want[s.Expect] {
					t.Fatalf("%s: %s, %v; want %s", at, o, err, s.Expect)
				}
			}
		})
	}
}
