package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RequireServersEnv makes the tests that need redis-server fail instead of skipping when there is
// none (hack/test-clients.sh sets it).
const requireServersEnv = "FENCEPOST_TEST_REQUIRE_REDIS"

// testRedis is a redis-server this test started on a free loopback port, stopped at the test's end.
type testRedis struct {
	t    *testing.T
	port int
	addr string
	url  string
	cmd  *exec.Cmd
	dir  string
	// extra are more redis-server arguments (a Cluster node, a Sentinel).
	extra []string
	// client is a plain connection for the test's own reads and writes.
	client *redis.Client
}

// redisServerBinary is $REDIS_SERVER, else redis-server on PATH; the test is skipped (or fails,
// with FENCEPOST_TEST_REQUIRE_REDIS=1) without one.
func redisServerBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	b, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(requireServersEnv) == "1" {
			t.Fatalf("redis-server not found on PATH (set REDIS_SERVER): %v", err)
		}
		t.Skip("redis-server not found on PATH (set REDIS_SERVER); the store tests against real servers are skipped")
	}
	return b
}

// startRedis starts n redis-servers (in parallel) and stops them when the test ends.
func startRedis(t *testing.T, n int) []*testRedis {
	t.Helper()
	bin := redisServerBinary(t)
	servers := make([]*testRedis, n)
	errs := make(chan error, n)
	for i := range servers {
		go func() {
			s, err := launchRedis(t, bin)
			servers[i] = s
			errs <- err
		}()
	}
	var first error
	for range servers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			if s != nil {
				s.stop()
			}
		}
	})
	if first != nil {
		t.Fatal(first)
	}
	return servers
}

// portsGiven are the ports freePort has handed out in this process: the kernel may give a port
// just released to the next caller, and servers started in parallel would then share one.
var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// freePort is a loopback port nothing listened on a moment ago and this process has not handed
// out before.
func freePort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		portsMu.Lock()
		fresh := !portsGiven[port]
		portsGiven[port] = true
		portsMu.Unlock()
		if fresh {
			return port, nil
		}
	}
	return 0, errors.New("no loopback port this process has not used, in 100 tries")
}

// errPortTaken: another process answered on the port chosen for our server (it took the port
// between freePort and our bind); launchRedis tries another.
var errPortTaken = errors.New("port taken by another process")

func launchRedis(t *testing.T, bin string, extra ...string) (*testRedis, error) {
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &testRedis{t: t, port: port, dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port)}
		s.url = "redis://" + s.addr
		s.extra = extra
		err = s.start(bin)
		if errors.Is(err, errPortTaken) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.client = redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DisableIdentity: true})
		return s, nil
	}
}

func (s *testRedis) start(bin string) error {
	args := []string{"--port", fmt.Sprint(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--protected-mode", "yes", "--loglevel", "warning", "--logfile", filepath.Join(s.dir, "redis.log")}
	if len(s.extra) > 0 && s.extra[0] == "--sentinel" {
		// A Sentinel takes its configuration file first (it rewrites it) and no persistence flags.
		conf := filepath.Join(s.dir, "sentinel.conf")
		if err := os.WriteFile(conf, nil, 0o600); err != nil {
			return err
		}
		args = append([]string{conf}, "--port", fmt.Sprint(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
			"--logfile", filepath.Join(s.dir, "redis.log"))
	}
	s.cmd = exec.Command(bin, append(args, s.extra...)...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			// An answer proves a server on the port, not ours: a server that lost the bind race
			// exits while the one that won answers for it.
			if pid := infoField(info, "process_id"); pid != strconv.Itoa(s.cmd.Process.Pid) {
				_ = s.cmd.Process.Kill()
				_ = s.cmd.Wait()
				return fmt.Errorf("%s answered with process_id %s, ours is %d: %w", s.addr, pid, s.cmd.Process.Pid, errPortTaken)
			}
			return nil
		}
		if time.Now().After(deadline) {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s not ready: %v\n%s", s.addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// infoField is the value of one field of an INFO answer ("" when absent).
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// startOne starts one redis-server with extra arguments and stops it when the test ends.
func startOne(t *testing.T, extra ...string) *testRedis {
	t.Helper()
	s, err := launchRedis(t, redisServerBinary(t), extra...)
	if s != nil {
		t.Cleanup(s.stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stop kills the server (it keeps no data) and waits for it.
func (s *testRedis) stop() {
	if s.client != nil {
		_ = s.client.Close()
	}
	if s.cmd != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// pause SIGSTOPs the server (it stops answering, its connections stay open); resume continues it.
func (s *testRedis) pause()  { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *testRedis) resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

func TestAServerThatLostTheBindRaceIsNotTakenForOurs(t *testing.T) {
	// Another server already listens on the port: ours fails to bind and exits, and the other one
	// answers in its place. start must say so, not hand back the other server as ours.
	first := startOne(t)
	s := &testRedis{t: t, port: first.port, dir: t.TempDir(), addr: first.addr}
	err := s.start(redisServerBinary(t))
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("start on a port another server holds: got %v, want errPortTaken", err)
	}
}
