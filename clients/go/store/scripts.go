package store

import "github.com/redis/go-redis/v9"

// The scripts, run with EVALSHA (EVAL after NOSCRIPT) by go-redis's Script.Run. Their text is
// composed in protocol_gen.go from the shared files of clients/conformance as store.json "scripts"
// says, byte for byte, so that the same script (and SHA) runs whichever language sent it. Keys,
// arguments and answers: each file's header.
var (
	acquireScript        = redis.NewScript(acquireLua)
	renewScript          = redis.NewScript(renewLua)
	releaseScript        = redis.NewScript(releaseLua)
	redlockAcquireScript = redis.NewScript(redlockAcquireLua)
	redlockRaiseScript   = redis.NewScript(redlockRaiseLua)
)
