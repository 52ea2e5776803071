// Package version says which release of mq a program is. Every program
// prints it with --version, and mqd tells clients in its ApiVersions
// responses (lib/kafkaext, ApiVersions), so mqctl cluster describe shows
// the version each broker runs.
//
// The release is stamped at build time:
//
//	go build -ldflags "-X github.com/mqproject/mq/lib/version.stamp=v0.4.0" ./cmd/...
//
// make build and install.sh stamp the output of git describe --tags
// --dirty --always: the latest tag and the commits since, or in a checkout
// without a tag the commit's abbreviated hash. A program built without the
// stamp reports what the Go toolchain recorded: the module version (the
// tag of go install …@v0.4.0, or a pseudo-version naming the commit a
// checkout was built from, v0.0.0-20250101…-abcdef), else the commit from
// the version-control information (go build with -buildvcs), as
// dev-abcdef123456, with -dirty for uncommitted changes, else "dev"
// (go test, go run).
package version

import (
	"runtime/debug"
	"sync"
)

// stamp is set with -ldflags -X (see the package comment); -X sets only
// string variables, so it must stay one.
var stamp string

// String is mq's release: the build's stamp, else what the toolchain
// recorded (a module version, else dev-COMMIT), else "dev". It never changes while a program runs.
func String() string { return resolved() }

var resolved = sync.OnceValue(func() string {
	info, _ := debug.ReadBuildInfo()
	return resolve(stamp, info)
})

// resolve picks the version from the stamp and the build information
// (nil when the binary has none).
func resolve(stamp string, info *debug.BuildInfo) string {
	if stamp != "" {
		return stamp
	}
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		return "dev"
	}
	v := "dev-" + revision[:min(12, len(revision))]
	if modified == "true" {
		v += "-dirty"
	}
	return v
}
