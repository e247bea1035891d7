package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The store on the other Redis topologies its URLs name, each as small as it gets: a one-node
// Cluster owning every slot (which refuses a script naming keys of two slots: the holder key's
// hash tag is what keeps the grant and its token one script there), and one Sentinel monitoring
// one master. Failover and resharding are not tested.

func TestAOneNodeClusterGrantsReleasesAndWakesWaiters(t *testing.T) {
	node := startOne(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	ctx := context.Background()
	if err := node.client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if info := node.client.ClusterInfo(ctx).Val(); strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the one-node Cluster did not become ok")
		}
	}
	st := openStore(t, "redis+cluster://"+node.addr)
	a := mustAcquire(t, st, "clustered", Options{TTL: time.Second})
	waiter := make(chan *Lock, 1)
	go func() {
		l, err := st.Acquire(ctx, "clustered", Options{Wait: 5 * time.Second})
		if err != nil {
			t.Error(err)
		}
		waiter <- l
	}()
	time.Sleep(400 * time.Millisecond) // a renew on the Cluster
	if !a.Held() {
		t.Fatalf("lost on the Cluster: %v", a.Err())
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	b := <-waiter
	if b == nil {
		return
	}
	defer b.Release()
	// The epoch key shares the slot too: a new lock's token is floored at the clock, then +1.
	if !a.ClockFloored() || b.Token() != a.Token()+1 || b.ClockFloored() {
		t.Fatalf("tokens %s (clock floored %v) then %s (%v)", a.Token(), a.ClockFloored(), b.Token(), b.ClockFloored())
	}
}

func TestASentinelManagedMasterGrants(t *testing.T) {
	master := startOne(t)
	sentinel := startOne(t, "--sentinel", "monitor", "mymaster", "127.0.0.1", fmt.Sprint(master.port), "1")
	st := openStore(t, fmt.Sprintf("redis+sentinel://%s/mymaster", sentinel.addr))
	l := mustAcquire(t, st, "watched", Options{TTL: time.Second})
	if v := master.client.Get(context.Background(), l.Keys().Counter).Val(); v != l.Token().String() || !l.ClockFloored() {
		t.Fatalf("the master's counter %q, token %s, clock floored %v", v, l.Token(), l.ClockFloored())
	}
	// The grant's epoch is the master's replication ID and the Sentinel's config-epoch for it
	// (failovers.go): a failback to this master after a failover would then change it.
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.addr})
	defer sc.Close()
	m, err := sc.Master(context.Background(), "mymaster").Result()
	if err != nil {
		t.Fatal(err)
	}
	configEpoch := m["config-epoch"]
	if want := replID(t, master) + "@" + configEpoch; configEpoch == "" || master.client.Get(context.Background(), l.Keys().Epoch).Val() != want {
		t.Fatalf("epoch key %q, want %q", master.client.Get(context.Background(), l.Keys().Epoch).Val(), want)
	}
}
