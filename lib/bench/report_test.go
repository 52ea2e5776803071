package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/client"
)

func TestResultFormats(t *testing.T) {
	produce := &Result{Test: "produce", Topic: "t", Messages: 1_000_000, Bytes: 108_000_000, Seconds: 2,
		Latency: &Latency{P50: 1.5, P99: 12.25, P999: 0.5, Max: 150}, Settings: map[string]string{"acks": "all"}}
	produce.finish()
	consume := &Result{Test: "consume", Topic: "t", Messages: 4_000_000, Bytes: 400_000_000, Seconds: 1, Consumers: 4, Settings: map[string]string{}}
	consume.finish()
	e2e := &Result{Test: "e2e", Topic: "e", Messages: 100, Bytes: 10_000, Seconds: 1, Latency: &Latency{}, Late: 2, Lost: 1, Failed: 3,
		Broker: &BrokerUsage{CPUSeconds: 0.5, RSSPeakMiB: 30}, Settings: map[string]string{}}
	e2e.finish()
	for _, tc := range []struct {
		name string
		r    *Result
		want string
	}{
		{"produce", produce, "produce t: 1000000 msgs in 2.00 s, 500000 msgs/s, 54.0 MB/s; latency ms p50 1.50 p99 12.25 p99.9 0.500 max 150\n"},
		{"consume fan-out", consume, "consume t: 4000000 msgs in 1.00 s, 4000000 msgs/s, 400.0 MB/s (4 consumers)\n"},
		{"e2e with broker", e2e, "e2e e: 100 msgs in 1.00 s, 100 msgs/s, 0.0 MB/s; latency ms p50 0.000 p99 0.000 p99.9 0.000 max 0.000; late 2, lost 1; 3 failed; broker 0.50 CPU-s (5000.00 per 1M msgs), peak RSS 30 MiB\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteResult(&b, client.FormatTable, tc.r); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("table:\n got %q\nwant %q", b.String(), tc.want)
			}
			b.Reset()
			if err := WriteResult(&b, client.FormatJSON, tc.r); err != nil {
				t.Fatal(err)
			}
			if strings.Count(b.String(), "\n") != 1 {
				t.Errorf("JSON is not one line: %q", b.String())
			}
			var m map[string]any
			if err := json.Unmarshal(b.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"test", "topic", "messages", "bytes", "seconds", "msgs_per_sec", "mb_per_sec", "failed", "late", "lost", "settings"} {
				if _, ok := m[k]; !ok {
					t.Errorf("JSON lacks %q: %s", k, b.String())
				}
			}
			if _, ok := m["latency_ms"]; ok != (tc.r.Latency != nil) {
				t.Errorf("latency_ms present = %v, want %v", ok, tc.r.Latency != nil)
			}
		})
	}
	var m map[string]any
	b, _ := json.Marshal(produce)
	json.Unmarshal(b, &m)
	lat := m["latency_ms"].(map[string]any)
	if lat["p99.9"] != 0.5 || m["msgs_per_sec"] != 500000.0 {
		t.Errorf("JSON fields: %s", b)
	}
}

func TestSuiteTable(t *testing.T) {
	rep := &SuiteReport{Settings: map[string]string{"linger": "2ms", "acks": "all"}}
	rs := []*Result{{MsgsPerSec: 3}, {MsgsPerSec: 1}, {MsgsPerSec: 2}}
	rep.row("produce", "msgs/s", ">=", 2, rs, func(r *Result) float64 { return r.MsgsPerSec })
	rep.row("latency", "ms", "<=", 1, rs, func(r *Result) float64 { return r.MsgsPerSec / 2 })
	rep.row("info", "ms", "", 0, rs[:2], func(r *Result) float64 { return r.MsgsPerSec })
	var b bytes.Buffer
	if err := WriteSuite(&b, client.FormatTable, rep); err != nil {
		t.Fatal(err)
	}
	want := `RUN      TARGET  MEDIAN  RUNS       UNIT    OK
produce  >= 2    2       3 1 2      msgs/s  ok
latency  <= 1    1       1.5 0.5 1  ms      ok
info     -       2       3 1        ms      -
settings: acks=all linger=2ms
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteSuite(&b, client.FormatJSON, rep); err != nil {
		t.Fatal(err)
	}
	var back SuiteReport
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != 3 || back.Rows[0].Median != 2 || back.Rows[2].OK != nil || !*back.Rows[1].OK {
		t.Errorf("JSON rows: %s", b.String())
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{5}, 5}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestProcParsing(t *testing.T) {
	stat := []byte("1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 0 0\n")
	cpu, err := parseStatCPU(stat)
	if err != nil || cpu != 3 {
		t.Errorf("parseStatCPU = %v, %v; want 3 (300 ticks)", cpu, err)
	}
	if _, err := parseStatCPU([]byte("garbage")); err == nil {
		t.Error("parseStatCPU accepted garbage")
	}
	status := []byte("Name:\tmqd\nVmPeak:\t 100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n")
	hwm, err := parseStatusHWM(status)
	if err != nil || hwm != 2<<20 {
		t.Errorf("parseStatusHWM = %v, %v; want 2 MiB", hwm, err)
	}
	if _, err := parseStatusHWM([]byte("Name: x\n")); err == nil {
		t.Error("parseStatusHWM without VmHWM did not fail")
	}
}
