package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/mqproject/mq/lib/client"
)

// Result is what one run measured. Its JSON form (one object per line with
// -o json) is stable: fields are added, never renamed or removed.
type Result struct {
	// Test is the kind of run: produce, consume or e2e.
	Test  string `json:"test"`
	Topic string `json:"topic"`
	// Messages counts the messages acknowledged (produce), read (consume,
	// summed over consumers) or received (e2e); Bytes their keys and values.
	Messages int64   `json:"messages"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	// MsgsPerSec and MBPerSec are Messages and Bytes (in 1e6 bytes) over
	// Seconds.
	MsgsPerSec float64 `json:"msgs_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
	// Latency is the produce latency (send to acknowledgment) of a produce
	// run, or the publish-to-consume latency of an e2e run, in
	// milliseconds; absent for consume.
	Latency *Latency `json:"latency_ms,omitempty"`
	// Failed counts produce attempts that were not acknowledged.
	Failed int64 `json:"failed"`
	// Late counts e2e messages that arrived later than the late threshold;
	// Lost those acknowledged but never received. Zero for other runs.
	Late int64 `json:"late"`
	Lost int64 `json:"lost"`
	// Consumers is how many consumers read the topic at once (consume).
	Consumers int `json:"consumers,omitempty"`
	// Broker is the broker process's resource use, when its pid was given.
	Broker *BrokerUsage `json:"broker,omitempty"`
	// Settings are the client settings the run used, as name → value.
	Settings map[string]string `json:"settings"`
}

// BrokerUsage is what the broker process used during a run, read from
// /proc/PID/stat and /proc/PID/status.
type BrokerUsage struct {
	// CPUSeconds is user plus system CPU time during the run.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPerMillion is CPUSeconds per million messages.
	CPUPerMillion float64 `json:"cpu_seconds_per_million"`
	// RSSPeakMiB is the process's peak resident set (VmHWM) since it
	// started, in MiB.
	RSSPeakMiB float64 `json:"rss_peak_mib"`
}

// finish fills the rates from Messages, Bytes and Seconds.
func (r *Result) finish() {
	if r.Seconds > 0 {
		r.MsgsPerSec = float64(r.Messages) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / 1e6 / r.Seconds
	}
	if r.Broker != nil && r.Messages > 0 {
		r.Broker.CPUPerMillion = r.Broker.CPUSeconds / (float64(r.Messages) / 1e6)
	}
}

// Summary is the one-line form of a result, for people:
//
//	produce mqbench: 1000000 msgs in 1.02 s, 980392 msgs/s, 105.9 MB/s; latency ms p50 1.20 p99 3.10 p99.9 4.00 max 5.20
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d msgs in %.2f s, %.0f msgs/s, %.1f MB/s", r.Test, r.Topic, r.Messages, r.Seconds, r.MsgsPerSec, r.MBPerSec)
	if r.Consumers > 1 {
		fmt.Fprintf(&b, " (%d consumers)", r.Consumers)
	}
	if r.Latency != nil {
		fmt.Fprintf(&b, "; latency ms p50 %s p99 %s p99.9 %s max %s",
			fmtMS(r.Latency.P50), fmtMS(r.Latency.P99), fmtMS(r.Latency.P999), fmtMS(r.Latency.Max))
	}
	if r.Test == "e2e" {
		fmt.Fprintf(&b, "; late %d, lost %d", r.Late, r.Lost)
	}
	if r.Failed > 0 {
		fmt.Fprintf(&b, "; %d failed", r.Failed)
	}
	if r.Broker != nil {
		fmt.Fprintf(&b, "; broker %.2f CPU-s (%.2f per 1M msgs), peak RSS %.0f MiB", r.Broker.CPUSeconds, r.Broker.CPUPerMillion, r.Broker.RSSPeakMiB)
	}
	return b.String()
}

// fmtMS prints milliseconds with three significant figures at least.
func fmtMS(ms float64) string {
	switch {
	case ms < 1:
		return strconv.FormatFloat(ms, 'f', 3, 64)
	case ms < 100:
		return strconv.FormatFloat(ms, 'f', 2, 64)
	}
	return strconv.FormatFloat(ms, 'f', 0, 64)
}

// WriteResult prints r: its summary line, or one line of JSON.
func WriteResult(w io.Writer, f client.Format, r *Result) error {
	if f == client.FormatJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	_, err := io.WriteString(w, r.Summary()+"\n")
	return err
}

// settingsLine lists settings as "k=v k=v", sorted by key.
func settingsLine(s map[string]string) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + s[k]
	}
	return strings.Join(parts, " ")
}
