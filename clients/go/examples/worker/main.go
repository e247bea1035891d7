// Command worker holds a lock through the fencepost agent beside it and writes a report under
// the lock's fencing token, to Redis and to PostgreSQL, through the guards: a worker that was
// paused past its lease and replaced finds its late writes refused.
//
// Environment: FENCEPOST_LOCK (the DistributedLock), FENCEPOST_AGENT_URL (default
// http://127.0.0.1:7370), REDIS_URL, DATABASE_URL.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
	"github.com/fencepost/fencepost/clients/go/guard"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	lock, err := fencepost.Acquire(ctx, os.Getenv("FENCEPOST_LOCK"), fencepost.Options{Wait: 30 * time.Second})
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
	cache, err := guard.NewRedis(rdb, guard.RedisOptions{Lock: lock.Name()}) // one mark per lock
	if err != nil {
		return err
	}

	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer db.Close()
	fences, err := guard.FenceTableSQL(guard.FenceTableSpec{}) // a migration: once
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, fences); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS reports (id bigint PRIMARY KEY, body text)`); err != nil {
		return err
	}
	reports, err := guard.NewSQL(db, guard.SQLSpec{
		Table: "reports", IDColumn: "id", SetColumns: []string{"body"}, Lock: lock.Name(),
	})
	if err != nil {
		return err
	}

	body := fmt.Sprintf("report written under token %s", lock.Token())
	cached, err := cache.Write(ctx, "report:latest", lock.Token(), body)
	if err != nil {
		return err
	}
	if !cached.Accepted() {
		return fmt.Errorf("redis refused token %s: a newer holder (token %s) has written", lock.Token(), cached.Mark)
	}
	stored, err := reports.Upsert(ctx, 1, lock.Token(), body)
	if err != nil {
		return err
	}
	if stored == guard.Stale {
		return fmt.Errorf("postgres refused token %s: a newer holder has written", lock.Token())
	}
	fmt.Printf("wrote %q to redis (%s) and postgres (%s)\n", body, cached.Outcome, stored)
	return nil
}
