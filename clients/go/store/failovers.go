package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelAsk bounds one SENTINEL MASTER question: a Sentinel slower than this is left out.
const sentinelAsk = 500 * time.Millisecond

// sentinelFailovers is the failover count of a Sentinel-managed master: the Sentinels'
// config-epoch for it, which every failover raises (src/stores/redis/sentinel-failovers.ts). The
// acquire script mixes it into the lock's epoch because the master's replication ID alone misses
// one failback: Sentinel promotes a replica, which grants, and fails back to the old master
// before it told that master to follow. That master kept its replication ID and its counter is
// below the replica's tokens; only the config-epoch says a failover happened in between.
//
// Every grant asks every Sentinel in parallel and takes the largest answer (a Sentinel that has
// not heard of the last failover answers an older one); when none answers, the largest seen
// before, and with none seen the grant fails.
type sentinelFailovers struct {
	master    string
	sentinels []*redis.SentinelClient
	addrs     []string

	mu   sync.Mutex
	last uint64
	seen bool
}

func newSentinelFailovers(t Target) *sentinelFailovers {
	f := &sentinelFailovers{master: t.Master}
	for _, e := range t.Endpoints {
		f.addrs = append(f.addrs, e.String())
		f.sentinels = append(f.sentinels, redis.NewSentinelClient(&redis.Options{
			Addr: e.String(), DialTimeout: sentinelAsk, ReadTimeout: sentinelAsk, WriteTimeout: sentinelAsk,
			MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true, DisableIdentity: true,
		}))
	}
	return f
}

// current is the largest config-epoch the Sentinels give now, in decimal.
func (f *sentinelFailovers) current(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, sentinelAsk)
	defer cancel()
	answers := make(chan uint64, len(f.sentinels))
	var wg sync.WaitGroup
	for _, s := range f.sentinels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := s.Master(ctx, f.master).Result()
			if err != nil {
				return
			}
			if v, err := strconv.ParseUint(m["config-epoch"], 10, 64); err == nil {
				answers <- v
			}
		}()
	}
	wg.Wait()
	close(answers)
	f.mu.Lock()
	defer f.mu.Unlock()
	for v := range answers {
		if !f.seen || v > f.last {
			f.last, f.seen = v, true
		}
	}
	if !f.seen {
		return "", fmt.Errorf("no Sentinel (%s) gave the config-epoch of master %s", strings.Join(f.addrs, ", "), f.master)
	}
	return strconv.FormatUint(f.last, 10), nil
}

func (f *sentinelFailovers) close() {
	for _, s := range f.sentinels {
		_ = s.Close()
	}
}
