//go:build !linux

package broker

// syncFileSystem reports false: there is no syncfs(2) here, and each log
// makes its own checkpoints durable.
func syncFileSystem(string) bool { return false }
