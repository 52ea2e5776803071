//go:build race

package server

// raceEnabled: the race detector drops a quarter of what goes into a
// sync.Pool and misses many of its reuses, so pooled paths allocate more.
const raceEnabled = true
