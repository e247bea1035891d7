package store

import (
	"fmt"
	"regexp"
	"strconv"
)

// Keys are the Redis keys and the release channel of one store lock (clients/conformance/store.json
// "keys", docs/stores.md "Keys"), the same in every fencepost client.
type Keys struct {
	// Counter is the fencing counter, fencepost:fence:NS/NAME — the controller's own key, so a
	// lock's tokens continue when it moves between the controller and a store. Never deleted,
	// never given a TTL.
	Counter string
	// Holder holds the current owner id with the TTL: fencepost:lock:{COUNTER}. The braces are a
	// Redis Cluster hash tag naming the counter key, so the holder, counter and epoch keys are in
	// one slot.
	Holder string
	// Epoch holds the replication ID (INFO replication master_replid) of the Redis master that
	// last issued a token for the lock: fencepost:epoch:{COUNTER} (same hash tag). Redis draws a
	// new one whenever a node becomes a master; when another one issues the next token (a new or
	// lost counter, a failover, a failback, a restart, a moved slot), the counter jumps by 1,000
	// and the token is floored at the server's clock in microseconds (fence-next.lua fence_epoch;
	// Lock.ClockFloored).
	Epoch string
	// Channel is where a release is published, for waiters: fencepost:released:NS/NAME.
	Channel string
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// IsDNSLabel reports whether s is an RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63.
func IsDNSLabel(s string) bool { return len(s) <= 63 && dnsLabel.MatchString(s) }

// LockKeys names the keys of lock name in namespace (DefaultNamespace when empty). Both must be
// DNS labels, checked before any key is made: no "{", "}" or "/" of theirs can change what a
// Cluster hashes or climb out of the namespace's prefix.
func LockKeys(namespace, name string) (Keys, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if !IsDNSLabel(namespace) {
		return Keys{}, fmt.Errorf("store: namespace must be a DNS label (a-z, 0-9, -; at most 63), got %s", strconv.Quote(namespace))
	}
	if !IsDNSLabel(name) {
		return Keys{}, fmt.Errorf("store: lock name must be a DNS label (a-z, 0-9, -; at most 63), got %s", strconv.Quote(name))
	}
	counter := counterKeyPrefix + namespace + "/" + name
	return Keys{
		Counter: counter,
		Holder:  holderKeyPrefix + "{" + counter + "}",
		Epoch:   epochKeyPrefix + "{" + counter + "}",
		Channel: channelPrefix + namespace + "/" + name,
	}, nil
}
