// Command scenarioworker is a Go worker that test/integration/clients/go.test.ts drives line by
// line on stdin, so that it can be paused (SIGSTOP) between its lock check and its write: it
// acquires FENCEPOST_LOCK through the agent at FENCEPOST_AGENT_URL, then answers each command with
// one JSON line on stdout. Commands: "check" (Held now), "write VALUE" (write VALUE under the
// token through the Redis guard, key scenario:value, and the SQL guard, table scenario row 1,
// without checking Held first), "status" (Held and why the term ended), "release".
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
	"github.com/fencepost/fencepost/clients/go/guard"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
)

func say(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func cause(l *fencepost.Lock) string {
	if err := l.Err(); err != nil {
		return err.Error()
	}
	return ""
}

func main() {
	if err := run(); err != nil {
		say(map[string]any{"event": "error", "error": err.Error()})
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer db.Close()
	name := os.Getenv("FENCEPOST_LOCK")
	cache, err := guard.NewRedis(rdb, guard.RedisOptions{Lock: name})
	if err != nil {
		return err
	}
	table, err := guard.NewSQL(db, guard.SQLSpec{Table: "scenario", IDColumn: "id", SetColumns: []string{"v"}, Lock: name})
	if err != nil {
		return err
	}

	lock, err := fencepost.Acquire(ctx, name, fencepost.Options{Wait: 60 * time.Second})
	if err != nil {
		return err
	}
	defer lock.Release()
	say(map[string]any{"event": "acquired", "token": lock.Token()})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "check":
			say(map[string]any{"event": "checked", "held": lock.Held(), "token": lock.Token()})
		case "write":
			// Deliberately no Held check here: the check came before the pause.
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			r, rerr := cache.Write(wctx, "scenario:value", lock.Token(), arg)
			o, serr := table.Upsert(wctx, 1, lock.Token(), arg)
			cancel()
			if rerr != nil || serr != nil {
				return fmt.Errorf("write: redis %v, sql %v", rerr, serr)
			}
			say(map[string]any{
				"event": "wrote", "token": lock.Token(), "redis": r.Outcome, "redisMark": r.Mark,
				"sql": o, "held": lock.Held(), "cause": cause(lock),
			})
		case "status":
			say(map[string]any{"event": "status", "held": lock.Held(), "cause": cause(lock)})
		case "release":
			err := lock.Release()
			say(map[string]any{"event": "released", "error": fmt.Sprint(err)})
		}
	}
	return in.Err()
}
