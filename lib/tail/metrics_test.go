package tail

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// exposition is what a broker's metrics endpoint might serve: help and
// type lines, other metrics, label values with escapes, a timestamp.
const exposition = `# HELP mq_topic_bytes_out_total Bytes fetched by consumers, by topic.
# TYPE mq_topic_bytes_out_total counter
mq_topic_bytes_out_total{topic="orders"} 1024
mq_topic_bytes_out_total{topic="a \"quoted\" topic"} 10 1700000000000
mq_topic_bytes_in_total{topic="orders"} 4096

# TYPE go_goroutines gauge
go_goroutines 42
mq_request_duration_seconds_bucket{api="Produce",le="+Inf"} 7
`

func TestParseTextReadsSamplesLabelsAndSkipsComments(t *testing.T) {
	samples, err := ParseText(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 5 {
		t.Fatalf("%d samples, want 5: %+v", len(samples), samples)
	}
	if s := samples[1]; s.Labels["topic"] != `a "quoted" topic` || s.Value != 10 {
		t.Errorf("escaped label: %+v", s)
	}
	if s := samples[4]; s.Labels["le"] != "+Inf" || s.Labels["api"] != "Produce" || s.Value != 7 {
		t.Errorf("two labels: %+v", s)
	}
	out := SumByLabel(samples, metricBytesOut, "topic")
	if out["orders"] != 1024 || out[`a "quoted" topic`] != 10 || len(out) != 2 {
		t.Errorf("bytes out by topic: %v", out)
	}
	for _, bad := range []string{"mq_x{topic=\"a} 1", "mq_x{topic=a} 1", "mq_x one", "{topic=\"a\"} 1"} {
		if _, err := ParseText(strings.NewReader(bad + "\n")); err == nil {
			t.Errorf("ParseText(%q): no error", bad)
		}
	}
}

// TestBytesOutFromAMetricsEndpoint scrapes an httptest server serving the
// counters, grown between two samples, and gets the rate per broker and
// per topic.
func TestBytesOutFromAMetricsEndpoint(t *testing.T) {
	var out atomic.Int64
	out.Store(1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write([]byte("# TYPE mq_topic_bytes_out_total counter\nmq_topic_bytes_out_total{topic=\"t\"} " +
			itoa(out.Load()) + "\nmq_topic_bytes_out_total{topic=\"u\"} 5\n"))
	}))
	defer srv.Close()
	src, err := ParseMetricsSource("1=" + srv.URL + "/metrics")
	if err != nil || src.Broker != 1 {
		t.Fatalf("ParseMetricsSource: %+v %v", src, err)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	scrape := func() Scrape {
		m, err := scrapeBytesOut(context.Background(), hc, src.URL)
		if err != nil {
			t.Fatal(err)
		}
		return Scrape{Source: src, BytesOut: m}
	}
	tr := NewTracker(time.Minute)
	s := sampleAt(t0, 0, 0, 0, []int32{1, 2})
	s.Metrics = []Scrape{scrape()}
	tr.Observe(s)
	out.Store(5000)
	s = sampleAt(t0.Add(2*time.Second), 0, 0, 0, []int32{1, 2})
	s.Metrics = []Scrape{scrape()}
	snap := tr.Observe(s)
	if b := snap.Brokers[0].BytesOutPerSec; b == nil || *b != 2000 {
		t.Errorf("broker 1 bytes out %v, want 2000 (4000 bytes in 2s)", b)
	}
	if b := snap.Brokers[1].BytesOutPerSec; b != nil {
		t.Errorf("broker 2 has no endpoint, bytes out %v, want null", *b)
	}
	if r := snap.Topics[0].BytesOutPerSec; r == nil || *r != 2000 {
		t.Errorf("topic t bytes out %v, want 2000", r)
	}

	srv.Close()
	if _, err := scrapeBytesOut(context.Background(), hc, src.URL); err == nil {
		t.Error("scrape of a closed endpoint: no error")
	}
}

func TestParseMetricsSource(t *testing.T) {
	for _, c := range []struct {
		in     string
		broker int32
		ok     bool
	}{
		{"http://h:9100/metrics", -1, true},
		{"3=https://h:9100/metrics", 3, true},
		{"h:9100", -1, false},
		{"x=http://h/metrics", -1, false},
		{"-1=http://h/metrics", -1, false},
		{"http://h/metrics?a=b", -1, true},
	} {
		src, err := ParseMetricsSource(c.in)
		if (err == nil) != c.ok || c.ok && src.Broker != c.broker {
			t.Errorf("ParseMetricsSource(%q) = %+v, %v", c.in, src, err)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
