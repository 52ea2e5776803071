package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mqproject/mq/lib/client"
)

// SuiteConfig is the standard set of runs of `make perf`.
type SuiteConfig struct {
	// Runs is how many times each run is repeated; the table shows the
	// median.
	Runs int
	// Messages is the size of each produce run and of the topic the
	// consume runs read.
	Messages int64
	// ValueSize and Keys shape the messages (see ProduceConfig).
	ValueSize int
	Keys      int64
	// FanOut is how many consumers read the same topic at once in the
	// fan-out run.
	FanOut int
	// E2ERate and E2EDuration shape the e2e runs; E2EGCMemoryLimit is
	// their E2EConfig.GCMemoryLimit.
	E2ERate          float64
	E2EDuration      time.Duration
	E2EGCMemoryLimit int64
	// TopicPrefix names the suite's topics: PREFIX-os-N, PREFIX-always-N,
	// PREFIX-e2e-N. They must not exist.
	TopicPrefix string
	// Producer is used by the produce runs (Acks is forced to all); the
	// e2e runs use it with Linger 0.
	Producer ProducerSettings
	Consumer ConsumerSettings
	// BrokerPID, when > 0, is the broker process to measure: CPU time per
	// million messages produced and peak resident memory.
	BrokerPID int
	// Log, when not nil, gets each run's summary line as it finishes.
	Log io.Writer
}

// SuiteRow is one line of the suite's table.
type SuiteRow struct {
	Name   string    `json:"name"`
	Target string    `json:"target"`
	Unit   string    `json:"unit"`
	Median float64   `json:"median"`
	Runs   []float64 `json:"runs"`
	// OK is whether the median meets the target; absent when not measured.
	OK *bool `json:"ok,omitempty"`
}

// SuiteReport is the suite's outcome.
type SuiteReport struct {
	Rows     []SuiteRow        `json:"rows"`
	Settings map[string]string `json:"settings"`
	Results  []*Result         `json:"results"`
}

// Suite runs the standard runs against the broker dial reaches.
func Suite(ctx context.Context, dial Dialer, cfg SuiteConfig) (*SuiteReport, error) {
	rep := &SuiteReport{Settings: map[string]string{}}
	cfg.Producer.Acks = -1
	cfg.Producer.settings(rep.Settings)
	cfg.Consumer.settings(rep.Settings)
	rep.Settings["runs"] = strconv.Itoa(cfg.Runs)
	rep.Settings["messages"] = strconv.FormatInt(cfg.Messages, 10)
	rep.Settings["value_size"] = strconv.Itoa(cfg.ValueSize)
	rep.Settings["keys"] = strconv.FormatInt(cfg.Keys, 10)

	admin, err := dial()
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	logResult := func(r *Result) {
		rep.Results = append(rep.Results, r)
		if cfg.Log != nil {
			fmt.Fprintln(cfg.Log, r.Summary())
		}
	}
	topic := func(kind string, i int) string { return fmt.Sprintf("%s-%s-%d", cfg.TopicPrefix, kind, i) }
	produce := func(kind string, i int, settings ProducerSettings) (*Result, error) {
		spec := TopicSpec{Name: topic(kind, i), Partitions: 1, Configs: map[string]string{"flush.policy": kind}}
		if _, err := EnsureTopic(ctx, admin, spec); err != nil {
			return nil, err
		}
		return Watch(cfg.BrokerPID, func() (*Result, error) {
			return Produce(ctx, dial, ProduceConfig{Topic: spec.Name, Messages: cfg.Messages, ValueSize: cfg.ValueSize, Keys: cfg.Keys, Producers: 1, Producer: settings})
		})
	}

	var prodOS, prodAlways, cons, fan, e2e []*Result
	for _, kind := range []string{"os", "always"} {
		for i := range cfg.Runs {
			r, err := produce(kind, i, cfg.Producer)
			if err != nil {
				return nil, fmt.Errorf("produce flush.policy=%s: %w", kind, err)
			}
			logResult(r)
			if kind == "os" {
				prodOS = append(prodOS, r)
			} else {
				prodAlways = append(prodAlways, r)
			}
		}
	}
	for _, n := range []int{1, cfg.FanOut} {
		for range cfg.Runs {
			r, err := Watch(cfg.BrokerPID, func() (*Result, error) {
				// One consumer reads partitions directly; the fan-out run is
				// n consumer groups, as the target is stated.
				return Consume(ctx, dial, ConsumeConfig{Topic: topic("os", 0), Messages: cfg.Messages, Consumers: n, Direct: n == 1, Consumer: cfg.Consumer})
			})
			if err != nil {
				return nil, fmt.Errorf("consume with %d consumers: %w", n, err)
			}
			logResult(r)
			if n == 1 {
				cons = append(cons, r)
			} else {
				fan = append(fan, r)
			}
		}
	}
	var lost int64
	for i := range cfg.Runs {
		spec := TopicSpec{Name: topic("e2e", i), Partitions: 1}
		if _, err := EnsureTopic(ctx, admin, spec); err != nil {
			return nil, err
		}
		ps := cfg.Producer
		ps.Linger = 0
		r, err := Watch(cfg.BrokerPID, func() (*Result, error) {
			return E2E(ctx, dial, E2EConfig{Topic: spec.Name, Rate: cfg.E2ERate, Duration: cfg.E2EDuration, ValueSize: cfg.ValueSize,
				Late: 5 * time.Millisecond, Wait: 5 * time.Second, Producer: ps, Consumer: cfg.Consumer,
				GCMemoryLimit: cfg.E2EGCMemoryLimit})
		})
		if r == nil {
			return nil, fmt.Errorf("e2e: %w", err)
		}
		logResult(r)
		lost += r.Lost + r.Failed
		e2e = append(e2e, r)
	}

	rate := func(r *Result) float64 { return r.MsgsPerSec }
	rep.row("produce acks=all flush.policy=os", "msgs/s", ">=", 1e6, prodOS, rate)
	rep.row("produce acks=all flush.policy=always", "msgs/s", ">=", 5e5, prodAlways, rate)
	rep.row(fmt.Sprintf("consume %d from the start", cfg.Messages), "msgs/s", ">=", 3e6, cons, rate)
	rep.row(fmt.Sprintf("consume %d x %d consumer groups (total)", cfg.Messages, cfg.FanOut), "msgs/s", ">=", 4e6, fan, rate)
	e2eName := fmt.Sprintf("e2e %.0f msgs/s for %s", cfg.E2ERate, cfg.E2EDuration)
	rep.row(e2eName+" p99", "ms", "<=", 1, e2e, func(r *Result) float64 { return r.Latency.P99 })
	rep.row(e2eName+" p99.9", "ms", "<=", 5, e2e, func(r *Result) float64 { return r.Latency.P999 })
	rep.row(e2eName+" max", "ms", "", 0, e2e, func(r *Result) float64 { return r.Latency.Max })
	rep.row(e2eName+" lost+failed", "msgs", "<=", 0, e2e, func(r *Result) float64 { return float64(r.Lost + r.Failed) })
	if cfg.BrokerPID > 0 {
		rep.row("broker CPU per 1M produced (flush.policy=os)", "CPU-s", "<=", 1, prodOS, func(r *Result) float64 { return r.Broker.CPUPerMillion })
		rep.row("broker CPU per 1M produced (flush.policy=always)", "CPU-s", "", 0, prodAlways, func(r *Result) float64 { return r.Broker.CPUPerMillion })
		st, err := ReadProc(cfg.BrokerPID)
		if err != nil {
			return nil, fmt.Errorf("--broker-pid: %w", err)
		}
		mib := float64(st.RSSPeakBytes) / (1 << 20)
		rep.row("broker peak RSS (VmHWM) over the suite", "MiB", "<=", 256, []*Result{{}}, func(*Result) float64 { return mib })
	}
	if lost > 0 {
		return rep, client.Failf("e2e: %d messages lost or not acknowledged", lost)
	}
	return rep, nil
}

// row adds a row whose value is f of each result; cmp is ">=", "<=" or ""
// (no target).
func (rep *SuiteReport) row(name, unit, cmp string, target float64, rs []*Result, f func(*Result) float64) {
	row := SuiteRow{Name: name, Unit: unit}
	for _, r := range rs {
		row.Runs = append(row.Runs, f(r))
	}
	row.Median = median(row.Runs)
	if cmp != "" {
		row.Target = cmp + " " + formatValue(target)
		ok := row.Median >= target
		if cmp == "<=" {
			ok = row.Median <= target
		}
		row.OK = &ok
	}
	rep.Rows = append(rep.Rows, row)
}

// median of vs (the mean of the middle two for an even count); 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// formatValue prints a measured value: integers above 100, three
// significant decimals below.
func formatValue(v float64) string {
	if v >= 100 || v == float64(int64(v)) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// WriteSuite prints the report: a table of medians (then the settings on
// one line) or one JSON document.
func WriteSuite(w io.Writer, f client.Format, rep *SuiteReport) error {
	if f == client.FormatJSON {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	rows := make([][]string, len(rep.Rows))
	for i, r := range rep.Rows {
		runs := make([]string, len(r.Runs))
		for j, v := range r.Runs {
			runs[j] = formatValue(v)
		}
		ok := "-"
		if r.OK != nil {
			ok = map[bool]string{true: "ok", false: "MISS"}[*r.OK]
		}
		target := r.Target
		if target == "" {
			target = "-"
		}
		rows[i] = []string{r.Name, target, formatValue(r.Median), strings.Join(runs, " "), r.Unit, ok}
	}
	if err := client.WriteTable(w, []string{"RUN", "TARGET", "MEDIAN", "RUNS", "UNIT", "OK"}, rows); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "settings: %s\n", settingsLine(rep.Settings))
	return err
}
