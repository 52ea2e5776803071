package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// SampleKeysDefault is how many keys topic alter --sample-keys reads when
// no count is given.
const SampleKeysDefault = 1000

// Bounds of a key sample: it reads for at most sampleWait and at most
// sampleBytes of record keys and values, whatever the count asked for.
const (
	sampleWait  = 10 * time.Second
	sampleBytes = 64 << 20
)

// KeySample is what topic alter learned from the recent keyed records of
// a topic about adding partitions to it. A record's partition is the one
// Kafka's default partitioner gives its key: murmur2(key), sign bit
// cleared, modulo the partition count (what kgo, mqpipe and the Java
// client do); adding partitions changes the modulus, and so the
// partition of most keys.
type KeySample struct {
	From int `json:"from_partitions"` // the partition count now
	To   int `json:"to_partitions"`   // the count asked for
	// Records is how many records were read, Keyed how many of them had
	// a key (an empty key is a key), Keys how many distinct keys those
	// had, Moved how many of the keys the default partitioner places
	// on another partition after the change.
	Records int `json:"records"`
	Keyed   int `json:"keyed"`
	Keys    int `json:"keys"`
	Moved   int `json:"moved"`
	// Elsewhere is how many keys were not found on the partition the
	// default partitioner gives them under the present count, only on
	// others: their producers place records some other way, which Moved
	// does not predict. (A key also found on older partitions, as after
	// an earlier change of the count, is not elsewhere.)
	Elsewhere int `json:"elsewhere"`
	// Incomplete says why the sample ended before the end of every
	// partition's recent records (a time or size bound, a partition that
	// could not be read), or is empty.
	Incomplete string `json:"incomplete,omitempty"`
}

// Summary is the sample in one sentence, for the warning on stderr.
func (s KeySample) Summary() string {
	var out string
	switch {
	case s.Records == 0:
		out = "no records to sample"
	case s.Keys == 0:
		out = fmt.Sprintf("none of the %d records sampled has a key: no key to move", s.Records)
	default:
		out = fmt.Sprintf("%d of %d sampled keys (%d%%) would map to a different partition", s.Moved, s.Keys, percent(s.Moved, s.Keys))
	}
	if s.Elsewhere > 0 {
		out += fmt.Sprintf("; %d of them are not on the partition of their key's hash now (their producers choose partitions otherwise, and those keys may move differently)", s.Elsewhere)
	}
	if s.Incomplete != "" {
		out += " (" + s.Incomplete + ")"
	}
	return out
}

// percent is part of whole in percent, rounded; whole > 0.
func percent(part, whole int) int {
	return (part*100 + whole/2) / whole
}

// keyPlacer gives keys their partition as Kafka's default partitioner
// does, through kgo's own partitioner, so that what topic alter predicts
// is what kgo clients (mqpipe, mqbench, kgo's default) do. Not safe for
// concurrent use.
type keyPlacer struct {
	p   kgo.TopicPartitioner
	rec kgo.Record
}

func newKeyPlacer() *keyPlacer {
	return &keyPlacer{p: kgo.StickyKeyPartitioner(nil).ForTopic("")}
}

// partition is the partition of key, which must not be nil, among n.
func (k *keyPlacer) partition(key []byte, n int) int {
	k.rec.Key = key
	return k.p.Partition(&k.rec, n)
}

// countMoves fills in s.Keys, s.Moved and s.Elsewhere from the keys
// sampled, each with the partitions it was read from.
func countMoves(s *KeySample, keys map[string][]int32) {
	kp := newKeyPlacer()
	s.Keys, s.Moved, s.Elsewhere = len(keys), 0, 0
	for k, found := range keys {
		key := []byte(k)
		now := kp.partition(key, s.From)
		if kp.partition(key, s.To) != now {
			s.Moved++
		}
		if !slices.Contains(found, int32(now)) {
			s.Elsewhere++
		}
	}
}

// sampleKeys reads up to limit distinct keys from the recent records of
// topic, which has from partitions: the last ceil(limit/from) records
// below each partition's high-water mark, for at most sampleWait and
// sampleBytes. It counts what growing the topic to the partitions would
// move.
func (a *Admin) sampleKeys(ctx context.Context, topic string, from, to, limit int) (KeySample, error) {
	s := KeySample{From: from, To: to}
	facts, err := a.partitionFacts(ctx, []string{topic}, false)
	if err != nil {
		return s, requestError("topic alter: sample keys", err)
	}
	share := int64((limit + from - 1) / from)
	ends := map[int32]int64{}
	starts := map[int32]kgo.Offset{}
	var unread []string
	for k, f := range facts {
		if k.partition < 0 {
			return s, fmt.Errorf("topic alter: sample keys: %s: %s", topic, f.err)
		}
		if f.logEnd < 0 {
			unread = append(unread, fmt.Sprintf("partition %d: %s", k.partition, f.err))
			continue
		}
		if f.logEnd > f.logStart {
			ends[k.partition] = f.logEnd
			starts[k.partition] = kgo.NewOffset().At(max(f.logStart, f.logEnd-share))
		}
	}
	keys := map[string][]int32{}
	if len(ends) > 0 {
		if err := a.readKeys(ctx, topic, starts, ends, limit, &s, keys); err != nil {
			return s, err
		}
	}
	if len(unread) > 0 {
		slices.Sort(unread)
		s.Incomplete = joinNotes(s.Incomplete, fmt.Sprintf("not read: %s", strings.Join(unread, "; ")))
	}
	countMoves(&s, keys)
	return s, nil
}

// readKeys reads the records from starts up to ends (exclusive) of each
// partition of topic into keys (each key with the partitions it was read
// from), until limit keys, and counts them in s.
func (a *Admin) readKeys(ctx context.Context, topic string, starts map[int32]kgo.Offset, ends map[int32]int64, limit int, s *KeySample, keys map[string][]int32) error {
	cl, err := kgo.NewClient(append(a.cl.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchMaxBytes(sampleBytes/4),
		kgo.FetchMaxPartitionBytes(1<<20),
	)...)
	if err != nil {
		return fmt.Errorf("topic alter: sample keys: %w", err)
	}
	defer cl.Close()
	wait, cancel := context.WithTimeout(ctx, sampleWait)
	defer cancel()
	var failed []string
	read := 0
	for len(ends) > 0 && len(keys) < limit && read < sampleBytes {
		fs := cl.PollFetches(wait)
		if err := ctx.Err(); err != nil {
			return err
		}
		if wait.Err() != nil {
			s.Incomplete = fmt.Sprintf("stopped after %v", sampleWait)
			break
		}
		fs.EachError(func(_ string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			if _, ok := ends[p]; ok {
				failed = append(failed, fmt.Sprintf("partition %d: %s", p, errText(err, "")))
				delete(ends, p)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := ends[r.Partition]
			if !ok || r.Offset >= end || len(keys) >= limit {
				return
			}
			if r.Offset >= end-1 {
				delete(ends, r.Partition)
			}
			s.Records++
			read += len(r.Key) + len(r.Value)
			if r.Key == nil {
				return
			}
			s.Keyed++
			if found := keys[string(r.Key)]; !slices.Contains(found, r.Partition) {
				keys[string(r.Key)] = append(found, r.Partition)
			}
		})
	}
	if read >= sampleBytes && len(ends) > 0 && len(keys) < limit {
		s.Incomplete = fmt.Sprintf("stopped after %d MiB", sampleBytes>>20)
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		s.Incomplete = joinNotes(s.Incomplete, "not read: "+strings.Join(failed, "; "))
	}
	return nil
}

func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// growth is one topic of topic alter whose partition count grows.
type growth struct {
	topic    string
	from, to int
	sample   *KeySample
}

// warnGrowth writes to w, for each topic that grows, what adding
// partitions does to its keys, and the sample when there is one.
func warnGrowth(w io.Writer, gs []growth) {
	if w == nil {
		return
	}
	for _, g := range gs {
		fmt.Fprintf(w, "mqctl: warning: topic %s, %d to %d partitions: keyed records will map to different partitions (murmur2(key) mod the partition count), so the order of each key's records does not hold across the change, and partitions cannot be removed again\n", g.topic, g.from, g.to)
		if g.sample != nil {
			fmt.Fprintf(w, "mqctl: topic %s: %s\n", g.topic, g.sample.Summary())
		}
	}
}
