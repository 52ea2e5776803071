package tail

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// MetricsSource is one --metrics endpoint: a broker's Prometheus
// endpoint, named for the broker whose bytes out it counts (ID=URL), or
// for none (Broker -1: a plain URL, counted for the cluster and, on a
// single node, for its broker).
type MetricsSource struct {
	Broker int32
	URL    string
}

// ParseMetricsSource reads a --metrics value: URL or ID=URL, the URL
// http:// or https://.
func ParseMetricsSource(s string) (MetricsSource, error) {
	src := MetricsSource{Broker: -1, URL: s}
	if id, rest, ok := strings.Cut(s, "="); ok && !strings.Contains(id, "/") {
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return src, fmt.Errorf("--metrics %q: want URL or BROKER-ID=URL", s)
		}
		src.Broker, src.URL = int32(n), rest
	}
	u, err := url.Parse(src.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return src, fmt.Errorf("--metrics %q: want an http:// or https:// URL", s)
	}
	return src, nil
}

// Metric names mqtail reads (lib/metrics of mqd serves them): counters
// with a topic label.
const (
	metricBytesIn  = "mq_topic_bytes_in_total"
	metricBytesOut = "mq_topic_bytes_out_total"
)

// scrapeLimit bounds how much of an answer is read.
const scrapeLimit = 16 << 20

// scrapeBytesOut fetches url and returns mq_topic_bytes_out_total by
// topic.
func scrapeBytesOut(ctx context.Context, hc *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	samples, err := ParseText(io.LimitReader(resp.Body, scrapeLimit))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return SumByLabel(samples, metricBytesOut, "topic"), nil
}

// MetricSample is one sample line of the Prometheus text format.
type MetricSample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseText reads the Prometheus text exposition format (version 0.0.4):
// one sample per line, "name{label="value",...} value [timestamp]";
// comments (# HELP, # TYPE) and blank lines are skipped. A line it cannot
// read is an error naming its number.
func ParseText(r io.Reader) ([]MetricSample, error) {
	var out []MetricSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

var errSyntax = errors.New("not a sample line")

func parseSample(line string) (MetricSample, error) {
	s := MetricSample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return s, errSyntax
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		var err error
		if rest, err = parseLabels(rest[1:], s.Labels); err != nil {
			return s, err
		}
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return s, errSyntax
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `name="value",...}` into labels and returns what
// follows the closing brace.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return "", errSyntax
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		if !strings.HasPrefix(s, `"`) {
			return "", errSyntax
		}
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
				continue
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", errors.New("unterminated label value")
		}
		labels[name] = b.String()
		s = strings.TrimLeft(s[i+1:], " \t")
		s = strings.TrimPrefix(s, ",")
	}
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q: not a number", s)
	}
	return v, nil
}

// SumByLabel sums the samples of metric name by the value of label.
func SumByLabel(samples []MetricSample, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.Name == name {
			out[s.Labels[label]] += s.Value
		}
	}
	return out
}
