package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/client"
)

// Admin runs mqctl's commands against one cluster.
type Admin struct {
	adm *kadm.Client
	// cl is the client itself, for what kadm does not wrap: fetching the
	// first unconsumed record of a lagging partition (group describe's lag
	// in time) and retrying FindCoordinator.
	cl  *kgo.Client
	now func() time.Time // the clock lag in time is measured with
	// wait is how long a command asks again after a retriable answer
	// (retry); 0: it asks once. notices, when not nil, is told once per
	// command what it waits for.
	wait    time.Duration
	notices io.Writer
	noticed atomic.Bool // notices was told
}

// New returns an Admin that uses cl; closing cl is the caller's job. It
// asks each question once: see Retrying.
func New(cl *kgo.Client) *Admin {
	return &Admin{adm: kadm.NewClient(cl), cl: cl, now: time.Now}
}

// Retrying makes a ask again, for up to wait, when a live broker gives a
// retriable answer (client.Retriable: LEADER_NOT_AVAILABLE,
// NOT_LEADER_OR_FOLLOWER, COORDINATOR_LOAD_IN_PROGRESS, …), as mqd gives
// while it opens its partitions after a restart or while a cluster elects
// new leaders; it says on notices ("mqctl: waiting up to 30s: …"), once
// per command, what it waits for. A broker that does not answer is not
// asked again: its part is reported as unreachable. Retrying returns a.
func (a *Admin) Retrying(wait time.Duration, notices io.Writer) *Admin {
	a.wait, a.notices = wait, notices
	return a
}

// retry runs try, and with Retrying runs it again while it returns a
// retriable error (client.Retry), saying once on the notices writer what
// it waits for. It returns try's last error.
func (a *Admin) retry(ctx context.Context, try func(context.Context) error) error {
	if a.wait <= 0 {
		return try(ctx)
	}
	return client.Retry(ctx, a.wait, try, func(err error) {
		if a.notices == nil || a.noticed.Swap(true) {
			return
		}
		fmt.Fprintf(a.notices, "mqctl: waiting up to %v: %s\n", a.wait, oneLine(err.Error()))
	})
}

// oneLine is s on one line: an error that quotes a broker's message may
// hold line breaks.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Result is what a command prints: a table for people, JSON for scripts.
type Result interface {
	// Table returns the header and rows of the table form.
	Table() (header []string, rows [][]string)
}

// tableWriter is a Result whose table form is more than one table.
type tableWriter interface {
	WriteTable(w io.Writer) error
}

// Partial reports whether r, which came with an error, still holds
// something to print: a command that failed wholly prints nothing on
// stdout, only its error on stderr, while one that failed for some topics,
// groups or partitions prints what it did for the others (and which failed
// and why). A result holds nothing when it is empty or when every item in
// it failed.
func Partial(r Result) bool {
	if r == nil {
		return false
	}
	if v := reflect.ValueOf(r); (v.Kind() == reflect.Slice || v.Kind() == reflect.Pointer || v.Kind() == reflect.Map) && v.IsNil() ||
		v.Kind() == reflect.Slice && v.Len() == 0 {
		return false
	}
	if f, ok := r.(interface{ allFailed() bool }); ok {
		return !f.allFailed()
	}
	return true
}

func (rs TopicResults) allFailed() bool {
	return !slices.ContainsFunc(rs, func(r TopicResult) bool { return r.Result != ResultFailed })
}

func (rs GroupResults) allFailed() bool {
	return !slices.ContainsFunc(rs, func(r GroupResult) bool { return r.Result != ResultFailed })
}

func (l DeletedRecordsList) allFailed() bool {
	return !slices.ContainsFunc(l, func(d DeletedRecords) bool { return d.Error == "" })
}

func (l SkippedRanges) allFailed() bool {
	return !slices.ContainsFunc(l, func(s SkippedRange) bool { return s.Error == "" })
}

// Write prints r to w in format f: the value itself as JSON, or its table.
func Write(w io.Writer, f client.Format, r Result) error {
	if f == client.FormatJSON {
		return client.WriteJSON(w, r)
	}
	if tw, ok := r.(tableWriter); ok {
		return tw.WriteTable(w)
	}
	header, rows := r.Table()
	return client.WriteTable(w, header, rows)
}

// Result values of the commands that change things.
const (
	ResultCreated = "created"
	ResultExists  = "exists" // topic create --if-not-exists, topic already there
	ResultDeleted = "deleted"
	ResultMissing = "missing" // --if-exists, topic not there
	ResultAltered = "altered"
	ResultFailed  = "failed"
)

// errText describes a broker's refusal: the Kafka error name and the
// broker's message, or kerr's description when the broker sent none.
func errText(err error, msg string) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if msg == "" {
			msg = ke.Description
		}
		return ke.Message + ": " + msg
	}
	if msg != "" {
		return err.Error() + ": " + msg
	}
	return err.Error()
}

// failures joins the failures of a multi-topic command into one error
// (client.Failf), or returns nil when there are none.
func failures(what string, failed []string) error {
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return client.Failf("%s: %s", what, failed[0])
	}
	return client.Failf("%s: %d failed: %s", what, len(failed), strings.Join(failed, "; "))
}

// requestError wraps an error of a whole request (not one topic's). A
// connection error keeps its type so that it exits 3.
func requestError(what string, err error) error {
	if client.IsUnreachable(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		return err
	}
	return client.Failf("%s: %s", what, errText(err, ""))
}

// ParseConfigs reads key=value arguments (-c flags, config set) into a map.
// A key given twice, an empty key or a missing "=" is a usage error.
func ParseConfigs(what string, kvs []string) (map[string]string, error) {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, client.Usagef("%s: want key=value, got %q", what, kv)
		}
		if _, dup := m[k]; dup {
			return nil, client.Usagef("%s: %s given twice", what, k)
		}
		m[k] = v
	}
	return m, nil
}

// ParseOffset reads a record offset: a number >= 0, or "end" (-1), the
// high-water mark, as DeleteRecords understands it.
func ParseOffset(what, s string) (int64, error) {
	if s == "end" || s == "hw" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, client.Usagef("%s: want an offset >= 0 or \"end\", got %q", what, s)
	}
	return n, nil
}

// CheckTopicNames refuses names no topic can have before asking the broker.
func CheckTopicNames(what string, topics []string) error {
	if len(topics) == 0 {
		return client.Usagef("%s: missing TOPIC", what)
	}
	seen := map[string]bool{}
	for _, t := range topics {
		if t == "" {
			return client.Usagef("%s: empty topic name", what)
		}
		if seen[t] {
			return client.Usagef("%s: topic %q given twice", what, t)
		}
		seen[t] = true
	}
	return nil
}

func itoa[T ~int16 | ~int32 | ~int64 | ~int](n T) string { return strconv.FormatInt(int64(n), 10) }

// joinIDs formats a replica list for a table: "1,2,3", "-" when empty.
func joinIDs(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = itoa(id)
	}
	return strings.Join(s, ",")
}

// orDash is s, or "-" for an empty table cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nonNil returns ids, or an empty slice so JSON says [] rather than null.
func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

func usagef(format string, a ...any) error { return client.Usagef(format, a...) }
