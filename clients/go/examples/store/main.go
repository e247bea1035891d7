// Command store holds a lock directly in Redis — no agent, no Kubernetes — and writes a report
// under the lock's fencing token through the Redis guard, so that a holder that was paused past
// its TTL and replaced finds its late write refused.
//
// Environment: FENCEPOST_STORE (redis://host:6379, or redlock://h1:6379,h2:6379,h3:6379 for
// Redlock), FENCEPOST_LOCK (the lock's name, a DNS label), REDIS_URL (where the report goes).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
	"github.com/fencepost/fencepost/clients/go/guard"
	"github.com/fencepost/fencepost/clients/go/store"
	"github.com/redis/go-redis/v9"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "store:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	name := os.Getenv("FENCEPOST_LOCK")
	lock, err := store.Acquire(ctx, os.Getenv("FENCEPOST_STORE"), name, store.Options{
		TTL:  10 * time.Second, // renewed every 3.3 s while held
		Wait: 30 * time.Second,
	})
	if errors.Is(err, fencepost.ErrNotAcquired) {
		return fmt.Errorf("not granted within 30s: %w", err)
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	ctx = lock.Context() // cancelled the moment the lock is lost

	opts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	reports, err := guard.NewRedis(rdb, guard.RedisOptions{Lock: name}) // one mark per lock
	if err != nil {
		return err
	}

	body := fmt.Sprintf("report written under token %s", lock.Token())
	w, err := reports.Write(ctx, "report:latest", lock.Token(), body)
	if err != nil {
		return err
	}
	if !w.Accepted() {
		return fmt.Errorf("redis refused token %s: a newer holder (token %s) has written", lock.Token(), w.Mark)
	}
	fmt.Printf("wrote %q (%s)\n", body, w.Outcome)
	return nil
}
