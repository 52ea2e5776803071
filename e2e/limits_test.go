package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// startLimitsBroker starts mqd with --metrics on a free port, under the
// open-files limit nofile (0: the test's), with props.
func startLimitsBroker(t *testing.T, nofile int, props ...string) (*broker, string) {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := &mqdProc{dataDir: t.TempDir(), props: props, nofile: nofile, args: []string{"--metrics", "tcp://" + addr}}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.cleanup(); err != nil {
			t.Error(err)
		}
	})
	return &broker{mqdProc: p, t: t}, addr
}

// metric is one sample of a /metrics scrape, 0 when absent.
func metric(t *testing.T, addr, name string, labels ...string) float64 {
	t.Helper()
	v, _ := sample(scrape(t, addr), name, labels...)
	return v
}

// dialFrom opens a TCP connection to addr from the loopback address local.
func dialFrom(local, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return d.Dial("tcp", addr)
}

// isOpen reports whether the server still holds c open: a read that
// waits is open, one that ends (EOF, reset) is closed.
func isOpen(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// warmUp makes cl open every connection it will use (metadata, produce,
// fetch, admin) to b, so that it needs no new one later.
func warmUp(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) {
	t.Helper()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Finding: 20,499 idle connections took every descriptor of a node. Under
// an open-files limit of 256, max.connections defaults to 96 (three
// quarters of what log.max.open.files leaves): 400 idle connections are
// cut to that, the rest closed at once and counted, and the client that
// was connected before creates a topic (new segment files: descriptors)
// and produces to it meanwhile. Once the flood is gone, new clients
// connect again.
func TestIdleConnectionFloodLeavesDescriptorsForTheNode(t *testing.T) {
	const nofile, flood = 256, 400
	b, metrics := startLimitsBroker(t, nofile)
	ctx := ctxFor(t, 2*time.Minute)
	cl := b.client()
	warmUp(t, ctx, cl, "before")

	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range flood {
		c, err := net.DialTimeout("tcp", b.addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	mqtest.WaitFor(t, "the connections over max.connections to be refused", func() (bool, string) {
		refused := metric(t, metrics, "mq_connections_refused_total", "limit=max_connections")
		open := metric(t, metrics, "mq_connections")
		return refused >= flood-96 && open <= 96, fmt.Sprintf("%v refused, %v open", refused, open)
	})
	open := 0
	for _, c := range conns {
		if isOpen(c) {
			open++
		}
	}
	if open > 96 {
		t.Errorf("%d of the %d idle connections are open, want at most 96", open, flood)
	}

	// The client connected before works on, and the node has the
	// descriptors for new partitions.
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 8, 1, nil, "during"); err != nil || resp.Err != nil {
		t.Fatalf("create a topic during the flood: %v %v\n%s", err, resp.Err, tail(b.stderr.String(), 20))
	}
	for p := range int32(8) {
		r := &kgo.Record{Topic: "during", Partition: p, Value: []byte("during")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce during the flood: %v\n%s", err, tail(b.stderr.String(), 20))
		}
	}
	log := b.stderr.String()
	if strings.Contains(strings.ToLower(log), "too many open files") {
		t.Fatalf("mqd ran out of descriptors:\n%s", tail(log, 20))
	}
	if !strings.Contains(log, "too many connections") {
		t.Errorf("no log line about the refused connections:\n%s", tail(log, 20))
	}

	for _, c := range conns {
		c.Close()
	}
	mqtest.WaitFor(t, "the flood's connections to close", func() (bool, string) {
		open := metric(t, metrics, "mq_connections")
		return open < 10, fmt.Sprintf("%v open", open)
	})
	fresh := b.client()
	if err := fresh.ProduceSync(ctx, &kgo.Record{Topic: "during", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("a new client after the flood: %v", err)
	}
}

// max.connections.per.ip closes a peer's connections over its bound while
// other addresses, the overridden one up to its own bound, and the Unix
// socket are served. (The test's clients on 127.0.0.1 have an override of
// 100: kgo opens a connection per kind of request.)
func TestConnectionsPerIPAreBounded(t *testing.T) {
	b, metrics := startLimitsBroker(t, 0, "max.connections.per.ip=3", "max.connections.per.ip.overrides=127.0.0.3:5,127.0.0.1:100")
	ctx := ctxFor(t, time.Minute)
	cl := b.client()
	warmUp(t, ctx, cl, "t")

	count := func(local string, n int) (open int) {
		for range n {
			c, err := dialFrom(local, b.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if isOpen(c) {
				open++
			}
		}
		return open
	}
	if got := count("127.0.0.2", 6); got != 3 {
		t.Errorf("127.0.0.2: %d of 6 connections open, want 3", got)
	}
	if got := count("127.0.0.3", 7); got != 5 {
		t.Errorf("127.0.0.3 (override 5): %d of 7 connections open, want 5", got)
	}
	if v := metric(t, metrics, "mq_connections_refused_total", "limit=max_connections_per_ip"); v != 5 {
		t.Errorf("mq_connections_refused_total{limit=max_connections_per_ip} = %v, want 5", v)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("the client of 127.0.0.1: %v", err)
	}
	unix := kadm.NewClient(b.unixClient())
	if _, err := unix.ListTopics(ctx); err != nil {
		t.Fatalf("over the Unix socket: %v", err)
	}
}

// announceFrame opens a connection from local and sends only the size
// prefix of a frame of size bytes.
func announceFrame(t *testing.T, local, addr string, size int) net.Conn {
	t.Helper()
	c, err := dialFrom(local, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, uint32(size))); err != nil {
		t.Fatal(err)
	}
	return c
}

// Finding: three connections that announced 100 MiB frames and sent
// nothing held the request budget, and every large request waited until
// mqd closed them, again and again. Now the frames of one peer hold one
// share of the budget (half of what large frames may hold): the third
// waits without holding up others, a large produce of another client is
// answered while all three still wait, and each announced frame whose
// bytes do not come is closed after the body deadline (10 s), its
// reservation given back.
func TestAnnouncedFramesNeitherStallOthersNorStay(t *testing.T) {
	const MiB = 1 << 20
	b, metrics := startLimitsBroker(t, 0)
	ctx := ctxFor(t, 2*time.Minute)
	adm := b.admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("8388608")}, "large"); err != nil {
		t.Fatal(err)
	}
	cl := b.client(kgo.ProducerBatchMaxBytes(8*MiB), kgo.ProducerBatchCompression(kgo.NoCompression()))
	warmUp(t, ctx, cl, "small")

	var announced []net.Conn
	for range 3 {
		announced = append(announced, announceFrame(t, "127.0.0.2", b.addr, 100*MiB))
	}
	mqtest.WaitFor(t, "the three frames to be reserved or waiting", func() (bool, string) {
		fams := scrape(t, metrics)
		reserved, _ := sample(fams, "mq_request_bytes_reserved")
		waiting, _ := sample(fams, "mq_request_bytes_waiting")
		return reserved+waiting >= 300*MiB, fmt.Sprintf("%v reserved, %v waiting", reserved, waiting)
	})

	big := &kgo.Record{Topic: "large", Value: make([]byte, 4*MiB)}
	if err := cl.ProduceSync(ctx, big).FirstErr(); err != nil {
		t.Fatalf("large produce: %v", err)
	}
	for i, c := range announced {
		if !isOpen(c) {
			t.Fatalf("announced frame %d was closed before the large produce was answered: it waited for mqd to close them", i)
		}
	}

	mqtest.Wait{Timeout: time.Minute}.For(t, "the announced frames to be closed", func() (bool, string) {
		open := 0
		for _, c := range announced {
			if isOpen(c) {
				open++
			}
		}
		return open == 0, fmt.Sprintf("%d open", open)
	})
	mqtest.WaitFor(t, "their reservations to be given back", func() (bool, string) {
		fams := scrape(t, metrics)
		reserved, _ := sample(fams, "mq_request_bytes_reserved")
		waiting, _ := sample(fams, "mq_request_bytes_waiting")
		return reserved < MiB && waiting == 0, fmt.Sprintf("%v reserved, %v waiting", reserved, waiting)
	})
	if !strings.Contains(b.stderr.String(), "arriving too slowly") {
		t.Errorf("no log line about the frames that did not come:\n%s", tail(b.stderr.String(), 20))
	}
}

// Finding: one CreateTopics of 100,000 topics with validate_only took a
// node to 651 MiB and skipped the real checks. Now the request is
// refused whole (max.partitions.per.request, POLICY_VIOLATION) before
// any topic is looked at; nothing is created, and mqd stays within the
// harness's resident memory bound (checked when it stops).
func TestHundredThousandTopicValidateOnlyIsRefusedCheaply(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, 2*time.Minute)
	names := make([]string, 100_000)
	for i := range names {
		names[i] = fmt.Sprintf("flood-%06d", i)
	}
	adm := b.admin()
	resp, err := adm.ValidateCreateTopics(ctx, 1, 1, nil, names...)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp) != len(names) {
		t.Fatalf("%d topics answered, want %d", len(resp), len(names))
	}
	for _, r := range resp {
		if !errors.Is(r.Err, kerr.PolicyViolation) {
			t.Fatalf("topic %s: %v, want POLICY_VIOLATION", r.Topic, r.Err)
		}
	}
	// The same for a real creation; one of a sane size passes.
	created, err := adm.CreateTopics(ctx, 1, 1, nil, names...)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := created.On(names[0], nil); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("real creation of 100,000 topics: %v, want POLICY_VIOLATION", r.Err)
	}
	ok, err := adm.ValidateCreateTopics(ctx, 1, 1, nil, names[:100]...)
	if err != nil || ok.Error() != nil {
		t.Fatalf("validating 100 topics: %v %v", err, ok.Error())
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 0 {
		t.Fatalf("%d topics exist, want none", len(topics))
	}

	// CreatePartitions likewise.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "grow"); err != nil {
		t.Fatal(err)
	}
	for _, validateOnly := range []bool{true, false} {
		grow := adm.CreatePartitions
		if validateOnly {
			grow = adm.ValidateCreatePartitions
		}
		resp, err := grow(ctx, 20_000, "grow")
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resp.On("grow", nil); !errors.Is(r.Err, kerr.PolicyViolation) {
			t.Fatalf("validate_only %v: adding 20,000 partitions: %v, want POLICY_VIOLATION", validateOnly, r.Err)
		}
	}
}

// Finding: a Metadata request naming 1,000 unknown topics created all of
// them. Now it creates auto.create.topics.max.per.request (10), and the
// others are answered UNKNOWN_TOPIC_OR_PARTITION.
func TestMetadataOfThousandUnknownTopicsCreatesFew(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, time.Minute)
	cl := b.client()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for i := range 1000 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("unknown-%04d", i))
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	unknown := 0
	for _, rt := range resp.Topics {
		if rt.ErrorCode == kerr.UnknownTopicOrPartition.Code {
			unknown++
		}
	}
	topics, err := b.admin().ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 10 || unknown != 990 {
		t.Fatalf("%d topics exist and %d were answered unknown; want 10 and 990", len(topics), unknown)
	}
}
