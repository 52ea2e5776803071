// Package mqtest holds what the tests of several mq packages share. Only
// tests import it: no package of the programs links it (deps_test.go
// checks), and of ours it imports lib/loopback alone, test-only too.
//
// The data-driven scripts' runner is the sub-package dd, apart so that
// the tests of the lower packages (lib/group, lib/txn, lib/replica,
// lib/controller) link datadriven alone.
//
// # Waiting for a condition
//
// A test that needs another goroutine or process to reach a state waits
// on the condition, never for a fixed time, and when the state never
// comes it fails with what it last saw, not just "timed out". WaitFor does
// that:
//
//	mqtest.WaitFor(t, "every request to be read", func() (bool, string) {
//		n := handled.Load()
//		return n == 3, fmt.Sprintf("%d of 3 read", n)
//	})
//
// fails, if two requests only are ever read, with
//
//	timed out after 20s waiting for every request to be read; last seen: 2 of 3 read
//
// The condition says what it saw every time it is called, so that the
// failure describes the state at the deadline, not at some earlier call.
// Where a test can wait on a channel or on the code's own change
// notification instead (a clock.Manual, a Changed channel), it should:
// WaitFor is for state that only polling can see.
//
// Twenty seconds is long for a goroutine and short for a cluster of mqd
// processes: a wait that needs longer says so, and may name what to do
// when the state never comes (here, have every process print its
// goroutines' stacks):
//
//	mqtest.Wait{Timeout: time.Minute, OnTimeout: c.dumpStacks}.For(t, "a leader", cond)
//
// # A cluster in the test's process
//
// Cluster runs the members of one controller quorum in the test's process,
// each on loopback addresses of its own: the controllers of lib/controller
// and lib/partition's tests, the whole nodes of lib/node's. It owns what
// every such test needs: the members' addresses (a Raft one and a Kafka
// one, from lib/loopback) and data directories, the voters list, starting
// members together, stopping, crashing and restarting one, and crashing
// those still running when the test ends. What a member is, it leaves to
// the caller, who gives the functions that start and stop one:
//
//	var voters []controller.Voter // the cluster's, once it is made
//	c := mqtest.NewCluster(t, 3, mqtest.Lifecycle[*controller.Controller]{
//		Start: func(m mqtest.Member) (*controller.Controller, error) {
//			return controller.Open(controller.Config{NodeID: m.ID, Dir: m.Dir, Voters: voters, RaftAddr: m.RaftAddr})
//		},
//		Stop: (*controller.Controller).Close,
//	})
//	voters, _ = controller.ParseVoters(c.Voters())
//	c.StartAll()
//	c.Crash(2)
//	mqtest.WaitFor(t, "broker 2 fenced", c.Each(func(id int32, ctrl *controller.Controller) (bool, string) {
//		b := ctrl.Image().Brokers[2]
//		return b.Fenced, fmt.Sprintf("broker 2 %+v", b)
//	}))
//	c.Start(2) // on the same addresses and directory
//
// A member is known by its node ID, 1 to n for the voters and the next
// ones for the non-voters added after them. Its addresses and directory
// are its own for the life of the test, so a member that restarts finds
// its data and its peers find it. The domain's helpers (wait until every
// image holds a topic, a Kafka client of the nodes) stay in the packages
// whose tests use them, written on the Cluster.
//
// # A terminal
//
// Terminal opens a pseudo-terminal, for tests of what a tool does when its
// output is a terminal (a progress line, a note on stderr) and when it is
// not.
//
// # An S3-compatible store
//
// StartSeaweed runs SeaweedFS (`weed server`: master, volume server,
// filer, S3 gateway) on loopback ports of its own with a bucket, for the
// tests of tiered storage; it is killed and its directory removed when the
// test ends, and Stop and Start take it down and back on the same data:
//
//	s := mqtest.StartSeaweed(t) // skipped without weed, failed in CI (InCI)
//	s.Setenv(t)                 // the keys, for gocloud clients and mqd processes
//	bucket, err := blob.OpenBucket(ctx, s.URL()) // s3://mq-tier?endpoint=…
//
// Every server of a test process has the same keys: a package whose
// parallel tests start servers sets them once in its TestMain
// (SetSeaweedEnv), since a parallel test cannot call Setenv.
//
// The weed binary is $MQ_WEED or weed on $PATH; `.ci/seaweedfs` builds
// it (CI does, once, and keeps it).
package mqtest
