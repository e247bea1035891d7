package store

import (
	_ "embed" // the shared Lua scripts

	"github.com/redis/go-redis/v9"
)

// The shared scripts of clients/conformance, copied by go generate (go:embed cannot reach outside
// the module; TestEmbeddedScriptsAreTheSharedOnes fails when a copy differs). Keys, arguments and
// answers: each file's header.
var (
	//go:embed fence-next.lua
	fenceNextLua string
	//go:embed store-acquire.lua
	storeAcquireLua string
	//go:embed store-renew.lua
	storeRenewLua string
	//go:embed store-release.lua
	storeReleaseLua string
	//go:embed redlock-acquire.lua
	redlockAcquireLua string
	//go:embed redlock-raise.lua
	redlockRaiseLua string
)

// scriptFiles is clients/conformance/store.json "scripts": a script is the concatenation of its
// files' bytes, in order, so that the same script (and the same SHA for EVALSHA) runs whichever
// language sent it.
var scriptFiles = map[string][]string{
	"acquire":        {"fence-next.lua", "store-acquire.lua"},
	"renew":          {"store-renew.lua"},
	"release":        {"store-release.lua"},
	"redlockAcquire": {"fence-next.lua", "redlock-acquire.lua"},
	"redlockRaise":   {"fence-next.lua", "redlock-raise.lua"},
	"fenceNext":      {"fence-next.lua"},
}

var embedded = map[string]*string{
	"fence-next.lua":      &fenceNextLua,
	"store-acquire.lua":   &storeAcquireLua,
	"store-renew.lua":     &storeRenewLua,
	"store-release.lua":   &storeReleaseLua,
	"redlock-acquire.lua": &redlockAcquireLua,
	"redlock-raise.lua":   &redlockRaiseLua,
}

// compose is the script named in scriptFiles.
func compose(name string) string {
	s := ""
	for _, f := range scriptFiles[name] {
		s += *embedded[f]
	}
	return s
}

// The scripts, run with EVALSHA (EVAL after NOSCRIPT) by go-redis's Script.Run.
var (
	acquireScript        = redis.NewScript(compose("acquire"))
	renewScript          = redis.NewScript(compose("renew"))
	releaseScript        = redis.NewScript(compose("release"))
	redlockAcquireScript = redis.NewScript(compose("redlockAcquire"))
	redlockRaiseScript   = redis.NewScript(compose("redlockRaise"))
)
