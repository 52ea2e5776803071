package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/server"
)

// Source reads the state the scrape-time metrics show. MetricsSnapshot
// may be called concurrently (two scrapes at once). partitionSeries says
// whether the scrape wants Snapshot.Partitions; without it a Source may
// leave them out, but fills in everything else, GroupLag entries
// included (they are summed per group).
type Source interface {
	MetricsSnapshot(partitionSeries bool) Snapshot
}

// Config configures a Metrics.
type Config struct {
	// Source is read at every scrape; nil shows only the hook-fed and the
	// Go and process metrics.
	Source Source
	// PartitionSeries keeps the series with a partition label
	// (metrics.partition.series). Without them the group lag is one series
	// per group: the messages summed and the seconds the largest over its
	// partitions.
	PartitionSeries bool
	// APINames names API keys that kmsg does not know (mq's own
	// requests, lib/kafkaext).
	APINames map[int16]string
}

// requestBuckets spread from 100 µs (a produce to the page cache) to 30 s
// (a request timeout); fetch long-polls land near their MaxWaitMillis.
var requestBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// fsyncBuckets spread from 50 µs (a battery-backed cache) to 10 s (a
// disk in trouble).
var fsyncBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10}

// Metrics is one node's registry. Its methods are safe for concurrent use.
type Metrics struct {
	cfg      Config
	registry *prometheus.Registry

	requests  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	durations *prometheus.HistogramVec
	fsyncs    prometheus.Histogram

	// known are the series of API keys seen so far, by key, made on first
	// use so that the hot path looks up no label; keys beyond it (mq's
	// own) are in others.
	known  [128]atomic.Pointer[apiSeries]
	others sync.Map // int16 → *apiSeries
}

// apiSeries are one API's request series.
type apiSeries struct {
	name     string
	requests prometheus.Counter
	duration prometheus.Observer
}

// New makes a registry with mq's metrics and the standard Go and process
// collectors.
func New(cfg Config) *Metrics {
	m := &Metrics{
		cfg:      cfg,
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mq_requests_total", Help: "Requests answered, by Kafka API.",
		}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mq_request_errors_total", Help: "Error codes in responses (top level and per partition), by Kafka API and error name.",
		}, []string{"api", "error"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mq_request_duration_seconds", Help: "Time from a request's frame being read to its response being written, by Kafka API.",
			Buckets: requestBuckets,
		}, []string{"api"}),
		fsyncs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mq_fsync_duration_seconds", Help: "Duration of the partition logs' fsyncs (segments, indexes, checkpoints, directories).",
			Buckets: fsyncBuckets,
		}),
	}
	m.registry.MustRegister(m.requests, m.errors, m.durations, m.fsyncs,
		newStateCollector(cfg.Source, cfg.PartitionSeries),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry, for tests and for other collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Answered implements server.Observer: it counts the request, observes its
// duration and counts the error codes its response carries.
func (m *Metrics) Answered(key int16, elapsed time.Duration, resp server.Response) {
	s := m.series(key)
	s.requests.Inc()
	s.duration.Observe(elapsed.Seconds())
	for _, code := range resp.ErrorCodes {
		m.countError(s.name, code)
	}
	if resp.Msg != nil {
		responseErrors(resp.Msg, func(code int16) { m.countError(s.name, code) })
	}
}

func (m *Metrics) countError(api string, code int16) {
	if code == 0 {
		return
	}
	// kerr names every code it knows and calls the rest
	// UNKNOWN_SERVER_ERROR.
	name := "UNKNOWN_SERVER_ERROR"
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		name = ke.Message
	}
	m.errors.WithLabelValues(api, name).Inc()
}

// series returns the series of an API key, making them on first use.
func (m *Metrics) series(key int16) *apiSeries {
	if key >= 0 && int(key) < len(m.known) {
		if s := m.known[key].Load(); s != nil {
			return s
		}
		s := m.newSeries(key)
		m.known[key].Store(s)
		return s
	}
	if s, ok := m.others.Load(key); ok {
		return s.(*apiSeries)
	}
	s, _ := m.others.LoadOrStore(key, m.newSeries(key))
	return s.(*apiSeries)
}

func (m *Metrics) newSeries(key int16) *apiSeries {
	name := m.cfg.APINames[key]
	if name == "" {
		name = kmsg.NameForKey(key)
	}
	if name == "" {
		name = "ApiKey" + strconv.Itoa(int(key))
	}
	return &apiSeries{name: name, requests: m.requests.WithLabelValues(name), duration: m.durations.WithLabelValues(name)}
}

// ObserveFsync records one fsync's duration (the hook of lib/vfs's Timed).
func (m *Metrics) ObserveFsync(d time.Duration) { m.fsyncs.Observe(d.Seconds()) }

// Handler serves the registry in Prometheus' exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Serve serves the metrics at /metrics over HTTP on addr (tcp://host:port
// or host:port; port 0 picks a free port), on a listener of its own. It
// returns the address bound, host:port, and a function that stops the
// server: it waits (up to 5 s) for scrapes in progress, so that the
// Source may be closed after it returns.
func (m *Metrics) Serve(addr string, logger *slog.Logger) (string, func(), error) {
	l, err := net.Listen("tcp", strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) && logger != nil {
			logger.Warn("metrics server stopped", "err", err)
		}
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}
	return l.Addr().String(), stop, nil
}
