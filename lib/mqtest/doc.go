// Package mqtest holds what the tests of several mq packages share. Only
// tests import it: no package of the programs links it (deps_test.go
// checks), and it imports nothing of ours.
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
package mqtest
