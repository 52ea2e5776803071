package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/kafkaext"
)

// PingTimeout bounds how long Ping waits for the broker to answer.
const PingTimeout = 5 * time.Second

// metadataMinAge is the shortest time between two metadata requests of
// a tool's client (kgo.MetadataMinAge): after a broker is lost, how soon
// a client whose first look found the old leader asks again.
const metadataMinAge = 250 * time.Millisecond

// requestTimeoutOverhead is kgo.RequestTimeoutOverhead of a tool's
// producing client (kgo: 10 s; ProducerTimeouts): how long a request
// without a timeout of its own (Metadata, ApiVersions on a new
// connection, a write to the socket) may go unanswered, and how much
// longer than its own timeout a request with one (Produce, Fetch) may,
// before the client closes the connection and sends the request again.
// A frozen broker (SIGSTOP, a hung host) keeps its connections open and
// its host accepts new ones, but it answers nothing: every request a
// client sends it, until the client's metadata names another leader,
// waits this long. Those come one after another (kgo sends a broker's
// requests in turn, and asks any broker for metadata, the frozen one
// too), so this overhead, several times over, is the part of a stall
// behind a frozen leader that comes after the new leader is known. A
// live broker answers what a producer asks (Metadata, ApiVersions) in
// milliseconds, even on a busy machine, and holds a Metadata answer at
// most 4 s (lib/partition's hold for a gone leader), which this leaves
// room for; one slower than this costs the tool a new connection and a
// retry, not a record (a timed-out produce is retried, and idempotence
// drops the copy).
// Administration keeps kgo's 10 s: a broker holds some of its answers
// on purpose, longer (DescribeQuorum while there is no controller).
const requestTimeoutOverhead = 5 * time.Second

// produceRequestTimeout is kgo.ProduceRequestTimeout of a tool's
// producing client, the Produce request's own timeout (kgo: 10 s): how
// long the leader may wait for the in-sync replicas of an acks=all
// produce before it answers REQUEST_TIMED_OUT, which the client retries.
// With the overhead it bounds how long a produce sent to a frozen
// leader waits (12 s): past the broker session timeout
// (broker.session.timeout.ms, 9 s) and the controller's session check
// (at most 1 s later), so that by then the cluster has usually elected
// a new leader for the client to find.
const produceRequestTimeout = 7 * time.Second

// ProducerTimeouts are the options of a tool's client that produces
// (mqpipe produce, mqbench): a request to a broker that does not answer
// is given up after requestTimeoutOverhead, a produce after
// produceRequestTimeout and that (12 s), rather than kgo's 10 s and
// 20 s, so that a producer behind a frozen leader moves on soon after
// the cluster has elected another.
func ProducerTimeouts() []kgo.Opt {
	return []kgo.Opt{kgo.RequestTimeoutOverhead(requestTimeoutOverhead), kgo.ProduceRequestTimeout(produceRequestTimeout)}
}

// unixSeedHost names the i-th Unix socket seed for kgo, which wants
// host:port seeds; the dialer maps it back to the socket. The .invalid
// domain never resolves, so nothing else can be dialed by mistake.
func unixSeedHost(i int) string {
	return "unix-seed-" + strconv.Itoa(i) + ".mq.invalid:" + defaultPort
}

// NewClient returns a kgo client whose seeds are addrs; opts come after
// ours and may override them. Addresses with TLS (Addr.TLS) are dialed
// with it (kgo.DialTLSConfig), and so is every broker learned from them. Unix socket seeds are dialed through the
// socket; when every seed is a Unix socket, every broker address learned
// from metadata (the host:port the broker advertises) is dialed through the
// first socket as well, which is right for a single node.
func NewClient(addrs []Addr, opts ...kgo.Opt) (*kgo.Client, error) {
	if len(addrs) == 0 {
		return nil, Usagef("no broker address")
	}
	seeds, dial := dialPlan(addrs)
	// The program's name is its client id, so group describe and broker
	// logs say which tool a connection is; opts may override it.
	// mq's own requests (kafkaext) are sendable too.
	// A lost leader is looked up again within metadataMinAge rather
	// than kgo's 5 s, so a failover the cluster finishes in under a
	// second stalls a tool no longer than that.
	all := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(filepath.Base(os.Args[0])), kgo.MaxVersions(kafkaext.Versions()),
		kgo.MetadataMinAge(metadataMinAge)}
	if dial != nil {
		all = append(all, kgo.Dialer(dial))
	}
	for _, a := range addrs {
		if a.TLS == nil || a.Network != NetworkTCP {
			continue
		}
		if dial != nil {
			return nil, Usagef("TLS needs tcp:// or ssl:// broker addresses, not Unix sockets")
		}
		// kgo sets each connection's ServerName to the host it dials.
		all = append(all, kgo.DialTLSConfig(a.TLS))
		break
	}
	for _, a := range addrs {
		if a.SASL != nil {
			all = append(all, kgo.SASL(a.SASL))
			break
		}
	}
	all = append(all, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, Usagef("%v", err)
	}
	return cl, nil
}

// dialPlan returns the kgo seeds for addrs and, when some are Unix sockets,
// the dialer that reaches them.
func dialPlan(addrs []Addr) (seeds []string, dial func(ctx context.Context, network, host string) (net.Conn, error)) {
	sockets := map[string]string{} // seed host:port → socket path
	var first string
	allUnix := true
	for i, a := range addrs {
		if a.Network != NetworkUnix {
			allUnix = false
			seeds = append(seeds, a.Address)
			continue
		}
		host := unixSeedHost(i)
		sockets[host] = a.Address
		if first == "" {
			first = a.Address
		}
		seeds = append(seeds, host)
	}
	if len(sockets) == 0 {
		return seeds, nil
	}
	dial = func(ctx context.Context, network, host string) (net.Conn, error) {
		var d net.Dialer
		if path, ok := sockets[host]; ok {
			return d.DialContext(ctx, NetworkUnix, path)
		}
		if allUnix {
			return d.DialContext(ctx, NetworkUnix, first)
		}
		return d.DialContext(ctx, network, host)
	}
	return seeds, dial
}

// Ping checks that the broker at addrs answers a cheap request (Metadata
// for no topics) within PingTimeout. When none of the addresses accepts a
// connection the error is an *Error with ExitUnreachable saying
// "cannot reach mqd at ADDR: REASON — is mqd running?".
func Ping(ctx context.Context, cl *kgo.Client, addrs []Addr) error {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	// Dial first: a refused connection or a missing socket then says so
	// plainly, instead of whatever kgo makes of it after retrying.
	var dialErr error
	reached := false
	for _, a := range addrs {
		var d net.Dialer
		conn, err := d.DialContext(ctx, a.Network, a.Address)
		if err == nil {
			conn.Close()
			reached = true
			break
		}
		dialErr = err
	}
	if !reached {
		if parent := context.Cause(ctx); ctx.Err() != nil && !errors.Is(parent, context.DeadlineExceeded) {
			return parent
		}
		return Unreachable(addrs, dialErr)
	}
	if err := cl.Ping(ctx); err != nil {
		if IsUnreachable(err) || errors.Is(err, context.DeadlineExceeded) {
			return Unreachable(addrs, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return Failf("%s: %v", joinAddrs(addrs), err)
	}
	return nil
}

// Unreachable is the ExitUnreachable error for addrs, with the reason
// taken from err: "cannot reach mqd at tcp://127.0.0.1:9092: connection
// refused — is mqd running?".
func Unreachable(addrs []Addr, err error) *Error {
	return &Error{Code: ExitUnreachable, Err: fmt.Errorf("cannot reach mqd at %s: %s — is mqd running?", joinAddrs(addrs), Reason(err))}
}

// Reason is the part of a connection error a person needs: "connection
// refused", "no such file or directory", "i/o timeout".
func Reason(err error) string {
	var sys *os.SyscallError
	if errors.As(err, &sys) {
		return sys.Err.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer within " + PingTimeout.String()
	}
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// IsUnreachable reports whether err says that a connection to the broker
// could not be made or was lost: a dial error, a refused or reset
// connection, a missing socket, an unknown host.
func IsUnreachable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	var sys *os.SyscallError
	return errors.As(err, &op) || errors.As(err, &dns) || errors.As(err, &sys) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}
