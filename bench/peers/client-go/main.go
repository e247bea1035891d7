// Command client-go-peer is one leader-election candidate built on client-go's
// tools/leaderelection with a LeaseLock: the reference fencepost is benchmarked against.
//
// It prints one line per event on stdout, each "<event> <unix nanoseconds>", so the
// benchmark can time the moment this process knows it leads:
//
//	ready <ns>     the elector is about to run (the client is built)
//	started <ns>   OnStartedLeading: this candidate holds the lease
//	stopped <ns>   OnStoppedLeading: it no longer does (after the release on SIGTERM)
//	new-leader <ns> <identity>  OnNewLeader
//
// On SIGTERM or SIGINT it cancels the elector's context; with ReleaseOnCancel the elector
// clears the Lease's holder before Run returns, as a well-behaved client-go program does.
// A SIGKILL leaves the Lease to expire.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

var out sync.Mutex

// emit writes one event line; stdout is a pipe read by the benchmark, written unbuffered.
func emit(event string, extra ...string) {
	out.Lock()
	defer out.Unlock()
	line := fmt.Sprintf("%s %d", event, time.Now().UnixNano())
	for _, e := range extra {
		line += " " + e
	}
	fmt.Fprintln(os.Stdout, line)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to the kubeconfig")
	namespace := flag.String("namespace", "default", "namespace of the Lease")
	name := flag.String("lease", "", "name of the Lease")
	identity := flag.String("identity", "", "this candidate's identity")
	leaseDuration := flag.Duration("lease-duration", 15*time.Second, "LeaseDuration (client-go's usual default 15s)")
	renewDeadline := flag.Duration("renew-deadline", 10*time.Second, "RenewDeadline (usual default 10s)")
	retryPeriod := flag.Duration("retry-period", 2*time.Second, "RetryPeriod (usual default 2s)")
	qps := flag.Float64("qps", 5, "client QPS (rest.Config default 5)")
	burst := flag.Int("burst", 10, "client burst (rest.Config default 10)")
	flag.Parse()
	if *name == "" || *identity == "" {
		fmt.Fprintln(os.Stderr, "--lease and --identity are required")
		os.Exit(2)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(2)
	}
	cfg.QPS = float32(*qps)
	cfg.Burst = *burst
	cfg.UserAgent = "client-go-peer/" + *identity
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(2)
	}

	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-signals; cancel() }()

	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: *namespace, Name: *name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: *identity},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   *leaseDuration,
		RenewDeadline:   *renewDeadline,
		RetryPeriod:     *retryPeriod,
		ReleaseOnCancel: true,
		Name:            *name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { emit("started") },
			OnStoppedLeading: func() { emit("stopped") },
			OnNewLeader:      func(id string) { emit("new-leader", id) },
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "elector:", err)
		os.Exit(2)
	}
	emit("ready")
	elector.Run(ctx)
	emit("exited")
}
