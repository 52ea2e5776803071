//go:build tools

// Package mq pins the modules chosen for the project (docs/ARCHITECTURE.md) before every one of them is imported by real code.
package mq

import (
	_ "github.com/golang/snappy"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kerr"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "github.com/urfave/cli/v2"
	_ "go.etcd.io/bbolt"
)
