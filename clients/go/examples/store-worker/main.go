// Command store-worker is the Go side of the cross-language contention of store locks
// (test/support/store-contention.ts): it holds a lock through package store and writes under its
// token through the Redis guard, round after round, while a worker of another language does the
// same on the same lock; one JSON object per line on stdout says what happened.
//
//	store-worker --store <url> --lock <name> --namespace <ns> --ttl-ms <n> --guard <redis-url> --rounds <n> --hold-ms <n>
//
// Once connected it says "ready" and waits for a line on stdin: the harness starts both workers'
// rounds together, so that they contend from the first round however long each took to start.
// Each round: acquire (wait up to 20 s) → "acquired"; INCR "<lock>:inside" on the guard Redis
// ("overlap" unless the answer is 1); a fenced write of "<lock>:data" = the token through the
// guard (the lock-scoped mark of <lock>) → "write" with its outcome; sleep hold-ms; DECR; release →
// "released". Then "done", exit 0; on an error "error" with its message, exit 1.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fencepost/fencepost/clients/go/guard"
	"github.com/fencepost/fencepost/clients/go/store"
	"github.com/redis/go-redis/v9"
)

// event is one line of output; the fields are in the protocol's order.
type event struct {
	Worker  string `json:"worker"`
	Event   string `json:"event"`
	Token   string `json:"token,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Message string `json:"message,omitempty"`
}

func say(e event) {
	e.Worker = "go"
	b, _ := json.Marshal(e)
	os.Stdout.Write(append(b, '\n')) // unbuffered: one write per line
}

type config struct {
	store, lock, namespace, guard string
	ttlMs, rounds, holdMs         int
}

func main() {
	var c config
	fs := flag.NewFlagSet("store-worker", flag.ContinueOnError)
	fs.StringVar(&c.store, "store", "", "store URL (redis://, rediss://, redlock://...)")
	fs.StringVar(&c.lock, "lock", "", "lock name")
	fs.StringVar(&c.namespace, "namespace", store.DefaultNamespace, "lock namespace")
	fs.IntVar(&c.ttlMs, "ttl-ms", 2000, "lock TTL in ms")
	fs.StringVar(&c.guard, "guard", "", "Redis URL of the guarded data")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds")
	fs.IntVar(&c.holdMs, "hold-ms", 20, "how long each round holds the lock, in ms")
	if err := fs.Parse(os.Args[1:]); err != nil {
		say(event{Event: "error", Message: err.Error()})
		os.Exit(2)
	}
	if err := run(context.Background(), c); err != nil {
		say(event{Event: "error", Message: err.Error()})
		os.Exit(1)
	}
	say(event{Event: "done"})
}

func run(ctx context.Context, c config) error {
	if c.store == "" || c.lock == "" || c.guard == "" {
		return errors.New("--store, --lock and --guard are required")
	}
	st, err := store.Open(ctx, c.store)
	if err != nil {
		return err
	}
	defer st.Close()
	opts, err := redis.ParseURL(c.guard)
	if err != nil {
		return fmt.Errorf("--guard: %w", err)
	}
	data := redis.NewClient(opts)
	defer data.Close()
	g, err := guard.NewRedis(data, guard.RedisOptions{Lock: c.lock})
	if err != nil {
		return err
	}
	say(event{Event: "ready"})
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start line on stdin: %w", err)
	}
	inside := c.lock + ":inside"
	for range c.rounds {
		lock, err := st.Acquire(ctx, c.lock, store.Options{
			Namespace: c.namespace,
			TTL:       time.Duration(c.ttlMs) * time.Millisecond,
			Wait:      20 * time.Second,
		})
		if err != nil {
			return err
		}
		token := lock.Token().String()
		say(event{Event: "acquired", Token: token})
		n, err := data.Incr(ctx, inside).Result()
		if err != nil {
			return err
		}
		if n != 1 {
			say(event{Event: "overlap", Token: token})
		}
		w, err := g.Write(ctx, c.lock+":data", lock.Token(), token)
		if err != nil {
			return err
		}
		say(event{Event: "write", Token: token, Outcome: string(w.Outcome)})
		time.Sleep(time.Duration(c.holdMs) * time.Millisecond)
		if err := data.Decr(ctx, inside).Err(); err != nil {
			return err
		}
		if err := lock.Release(); err != nil {
			return err
		}
		say(event{Event: "released", Token: token})
	}
	return nil
}
