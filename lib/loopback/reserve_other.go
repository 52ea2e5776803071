//go:build !unix

package loopback

// reserve reserves nothing where there is no flock: the bind probe alone
// decides.
func reserve(int) bool { return true }
