package main

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/bench"
	"github.com/mqproject/mq/lib/client"
)

// Fast producer defaults: large batches keep requests few and full;
// compression is off (values are random, and compressing costs client CPU
// on the machine being measured). The producer does not linger: while its
// requests are in flight (up to 5) records pile up in their partitions'
// batches anyway, so lingering adds no batching at full speed. It costs
// a kgo timer per partition batch, which with keys spread over 10,000
// partitions (a batch of a few records each) was a third of mqbench's CPU.
const (
	defaultLinger      = 0
	defaultBatchBytes  = 1 << 20
	defaultMaxBuffered = 200_000
)

// The default partitioner sends 64 KiB of unkeyed messages to a partition,
// then picks another at random. kgo's own default (adaptive) picks the
// partition with the least backlog instead, scanning every partition of
// the topic each time: over 10,000 partitions that scan was a seventh of
// mqbench's CPU, and measured the client, not the broker.
const defaultPartitioner = "uniform"

// producerFlags are the kgo producer settings; linger is the default
// linger.
func producerFlags(linger time.Duration) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "acks", Value: "all", Usage: "required `ACKS`: all (-1), 1 or 0"},
		&cli.StringFlag{Name: "compression", Aliases: []string{"z"}, Value: "none", Usage: "batch `CODEC`: none, snappy, lz4, zstd or gzip"},
		&cli.DurationFlag{Name: "linger", Value: linger, Usage: "how long a batch waits for more messages (kgo ProducerLinger)"},
		&cli.IntFlag{Name: "batch-bytes", Value: defaultBatchBytes, Usage: "largest batch in `BYTES` (kgo ProducerBatchMaxBytes; keep it within the topic's max.message.bytes)"},
		&cli.IntFlag{Name: "max-buffered", Value: defaultMaxBuffered, Usage: "messages each producer may have unacknowledged (kgo MaxBufferedRecords)"},
		&cli.StringFlag{Name: "partitioner", Value: defaultPartitioner, Usage: "how messages without a key pick a partition: `NAME` uniform (64 KiB to one, then a random other) or adaptive (kgo's default: the one with the least backlog, scanning them all)"},
	}
}

func producerSettings(c *cli.Context) (bench.ProducerSettings, error) {
	s := bench.ProducerSettings{Compression: c.String("compression"), Linger: c.Duration("linger"), Partitioner: c.String("partitioner")}
	if _, err := bench.Partitioner(s.Partitioner); err != nil { // before the run creates its topic
		return s, err
	}
	switch a := strings.ToLower(c.String("acks")); a {
	case "all", "-1":
		s.Acks = -1
	case "0", "1":
		s.Acks = int16(a[0] - '0')
	default:
		return s, client.Usagef("--acks: want all, -1, 0 or 1, not %q", a)
	}
	if s.Linger < 0 {
		return s, client.Usagef("--linger: must not be negative")
	}
	b := c.Int("batch-bytes")
	if b < 0 || b > math.MaxInt32 {
		return s, client.Usagef("--batch-bytes: out of range")
	}
	s.BatchBytes = int32(b)
	if s.MaxBuffered = c.Int("max-buffered"); s.MaxBuffered < 0 {
		return s, client.Usagef("--max-buffered: must not be negative")
	}
	return s, nil
}

const (
	defaultFetchMaxBytes     = 64 << 20
	defaultFetchMaxPartBytes = 16 << 20
)

func consumerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "fetch-max-bytes", Value: defaultFetchMaxBytes, Usage: "largest fetch response in `BYTES` (kgo FetchMaxBytes)"},
		&cli.IntFlag{Name: "fetch-max-partition-bytes", Value: defaultFetchMaxPartBytes, Usage: "most `BYTES` per partition in a fetch (kgo FetchMaxPartitionBytes)"},
	}
}

func consumerSettings(c *cli.Context) (bench.ConsumerSettings, error) {
	var s bench.ConsumerSettings
	for _, f := range []struct {
		name string
		into *int32
	}{{"fetch-max-bytes", &s.FetchMaxBytes}, {"fetch-max-partition-bytes", &s.FetchMaxPartitionBytes}} {
		v := c.Int(f.name)
		if v < 0 || v > math.MaxInt32 {
			return s, client.Usagef("--%s: out of range", f.name)
		}
		*f.into = int32(v)
	}
	return s, nil
}

// positive reads an int flag that must be > 0.
func positive(c *cli.Context, name string) (int, error) {
	v := c.Int(name)
	if v <= 0 {
		return 0, client.Usagef("--%s: must be positive, not %s", name, strconv.Itoa(v))
	}
	return v, nil
}
