package node

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/broker"
	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/metrics"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/server"
	"github.com/mqproject/mq/lib/vfs"
)

// Daemon is one running mqd node: the data directory lock, the controller,
// the partitions, the Broker and the Server listening for it. Its methods
// are safe for concurrent use.
type Daemon struct {
	settings config.Broker
	log      *slog.Logger
	clock    clock.Clock
	lock     *dataDirLock
	ctrl     *controller.Controller
	parts    *partition.Manager
	peers    *peer.Pool // connections to the other brokers, for the broker's coordinators
	// peerTLS, with security.inter.broker.protocol SSL, is the TLS config
	// (this node's certificate) of every connection to another broker's
	// ssl:// listener; nil: they go to the plaintext listeners.
	peerTLS func() *tls.Config
	// coords are the group, transaction and share coordinators, which
	// the broker answers the Kafka APIs on.
	coords *coordinator.Set
	broker *broker.Broker
	server *server.Server
	// tls serves the ssl:// listeners; nil without a certificate.
	tls *server.TLS
	// nodeTLS is this node's identity on the controller port
	// (controller.ssl.*); nil without it.
	nodeTLS *controller.TLS

	// lagTimes caches the record timestamps of group lag (metrics.go).
	lagTimes lagTimeCache

	// metrics is nil unless s.MetricsListen is set; metricsAddr is where
	// it is served and stopMetrics stops serving it.
	metrics     *metrics.Metrics
	metricsAddr string
	stopMetrics func()

	// The broker's lifecycle with the controller (lifecycle.go).
	brokerEpoch   atomic.Int64
	stopHeartbeat context.CancelFunc
	heartbeatDone chan struct{}
	fatal         chan error // a configuration conflict found while running
	registration  controller.Broker
	// lost are the replicas that lost committed records, reported by the
	// first registration (Start's) and then forgotten: the controller
	// keeps them out of the ISR until they caught up.
	lost []controller.LostReplica
	// clusterIDChecked: meta.properties has been checked against the
	// image's cluster ID (only the heartbeat loop reads it after Start).
	clusterIDChecked bool

	// producerIDs are the broker's producer IDs, whose prefetch runs
	// from the registration on (startPrefetch).
	producerIDs  *controller.ProducerIDs
	stopPrefetch context.CancelFunc
	prefetchDone chan struct{}

	shutdownOnce sync.Once
	shutdownErr  error
}

// lockFileName is the lock file in the data directory; it holds the pid
// of the mqd using the directory.
const lockFileName = ".lock"

// catchUpTimeout bounds how long Start waits for the node's metadata image
// to catch up with the leader's before it opens the partitions.
const catchUpTimeout = 30 * time.Second

// controllerDirName is the controller's directory inside the data directory.
const controllerDirName = "__controller"

// DataDirInUseError is returned by Start when another process holds the
// data directory's lock.
type DataDirInUseError struct {
	Dir string
	PID int // 0 if the lock file did not say
}

func (e *DataDirInUseError) Error() string {
	pid := "pid unknown"
	if e.PID > 0 {
		pid = "pid " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("data directory %s is in use by another mqd (%s)", e.Dir, pid)
}

// Config is what a node is started with.
type Config struct {
	Settings config.Broker // mqd's settings: flags, environment, config file, defaults
	Logger   *slog.Logger  // nil = silent
	// Clock is the time of everything the node times itself: the
	// controller's broker liveness, the partitions' logs, replicas and
	// tasks, the broker's waits and group timers, the heartbeats and the
	// controlled shutdown. nil = real time; tests step a clock.Manual.
	Clock clock.Clock
}

// Start brings up a node with cfg.Settings s and returns once it is
// serving:
//
//  1. create s.DataDir (0750; one that exists and that others may read
//     or enter is logged as a warning) and lock it (DataDir/.lock,
//     flock, holding our pid): a second mqd on the same directory gets a
//     *DataDirInUseError;
//  2. open the controller in DataDir/__controller with the voters of
//     s.Voters;
//  3. open the partitions (lib/partition), whose follow loop opens the
//     logs of those this node hosts, leading none of them yet, and the
//     Broker on them;
//  4. start the Server on s.Listeners (a Unix socket's directory that
//     another user could write in is a *ConfigError), and wait for those logs (a
//     request for one still opening gets a retriable error, and so does
//     a produce or fetch for one the image names this node leader of);
//  5. register this broker with the controller under its advertised
//     address: s.Advertise, else the first TCP listener's actual address
//     (so port 0 works; an unspecified host such as 0.0.0.0 becomes the
//     host name), else the first ssl:// listener's, else "localhost"
//     port 0 when there is no TCP listener; the ssl:// listeners'
//     addresses are registered too, and clients that came on one are
//     given those (lib/broker);
//     once the image holds the registration, which gave every partition
//     this node led before a new leader epoch or another leader, the
//     node leads where the image says (partition.Manager.MayLead), and the group
//     coordinator loads its partitions; from the registration on, the
//     broker keeps a block of producer IDs at hand
//     (controller.ProducerIDs), so that new idempotent producers
//     start while the controller quorum is lost for a while;
//  6. start the heartbeats, and the partitions' log tasks: retention
//     every s.LogRetentionCheckInterval, the cleaner and the scrubber
//     (partition.Manager.StartLogTasks).
//
// The server starts before the registration because the advertised port
// is only known once the TCP listener is open; a Metadata request in
// between sees no broker for this node yet. ctx bounds the registration.
// On error, whatever was started is stopped again.
func Start(ctx context.Context, cfg Config) (_ *Daemon, err error) {
	s, logger, clk := cfg.Settings, cfg.Logger, cfg.Clock
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.Real()
	}
	if s.DataDir == "" {
		return nil, errors.New("no data directory")
	}
	voters, err := controller.ParseVoters(s.Voters)
	if err != nil {
		return nil, &ConfigError{err}
	}
	raftAddr, err := raftAddress(s, voters)
	if err != nil {
		return nil, err
	}
	tlsFiles, err := newTLS(s)
	if err != nil {
		return nil, &ConfigError{err}
	}
	nodeTLS, err := newNodeTLS(s)
	if err != nil {
		return nil, &ConfigError{err}
	}
	d := &Daemon{settings: s, log: logger, clock: clk, fatal: make(chan error, 1), tls: tlsFiles, nodeTLS: nodeTLS}
	defer func() {
		if err != nil {
			d.closeParts(context.Background())
		}
	}()

	if fi, err := os.Stat(s.DataDir); err == nil && fi.Mode().Perm()&0o005 != 0 {
		logger.Warn("the data directory is open to other users: they can read the messages in it; chmod o-rwx it",
			"data_dir", s.DataDir, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	if err := vfs.MkdirAllDurable(vfs.OS, s.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if d.lock, err = lockDataDir(s.DataDir); err != nil {
		return nil, err
	}
	if err := checkMeta(vfs.OS, s.DataDir, s.NodeID, ""); err != nil {
		return nil, err
	}
	ccfg := controller.Config{
		NodeID:                       s.NodeID,
		Dir:                          filepath.Join(s.DataDir, controllerDirName),
		Voters:                       voters,
		RaftAddr:                     raftAddr,
		Logger:                       logger.With("component", "controller"),
		Clock:                        clk,
		BrokerSessionTimeout:         s.BrokerSessionTimeout,
		UncleanLeaderElection:        s.UncleanLeaderElection,
		BrokerHeartbeatInterval:      s.BrokerHeartbeatInterval,
		AutoLeaderRebalance:          s.AutoLeaderRebalance,
		LeaderImbalanceCheckInterval: s.LeaderImbalanceCheckInterval,
		NoProcessProbes:              !s.ProcessProbe,
		TLS:                          nodeTLS,
	}
	d.ctrl, err = controller.Open(ccfg)
	if err != nil {
		if errors.Is(err, controller.ErrVotersMismatch) {
			return nil, &ConfigError{err}
		}
		return nil, err
	}
	if err := d.checkClusterID(); err != nil {
		return nil, err
	}
	if partition.HostsPartitions(vfs.OS, s.DataDir) {
		// The image must hold every partition this node hosts before
		// they open, so that the registration names those that lost
		// committed records.
		cctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
		err := d.ctrl.CatchUp(cctx)
		cancel()
		if err != nil {
			logger.Warn("starting on a metadata image that may be behind: a replica that lost committed records and is not in it yet goes unreported", "err", err)
		}
	}
	// The node leads nothing until its registration is in the image.
	pcfg := partition.Config{Settings: s, Controller: d.ctrl, Logger: logger.With("component", "broker"), Clock: clk, AwaitRegistration: true}
	if s.InterBrokerProtocol == "SSL" && nodeTLS != nil {
		// Followers fetch over their leaders' ssl:// listeners as this node.
		pcfg.PeerTLS = nodeTLS.ClientConfig
	}
	if s.ProcessProbe {
		// Gone brokers found by this node hold Metadata answers until the
		// controller, probing too, has fenced them; without its probes
		// it would not within the hold.
		if pcfg.PeerTLS != nil {
			pcfg.Watch = peer.NewWatchTLS(clk, logger.With("component", "broker"), pcfg.PeerTLS)
		} else {
			pcfg.Watch = peer.NewWatch(clk, logger.With("component", "broker"))
		}
	}
	d.peerTLS = pcfg.PeerTLS
	overrides, err := config.ParseConnectionOverrides(s.MaxConnectionsPerIPOverrides)
	if err != nil {
		return nil, &ConfigError{fmt.Errorf("max.connections.per.ip.overrides: %w", err)}
	}
	scfg := server.Config{
		Listeners:                    s.Listeners,
		TLS:                          d.tls,
		MaxRequestBytes:              s.SocketRequestMaxBytes,
		QueuedMaxRequestBytes:        queuedMaxRequestBytes(s.QueuedMaxRequestBytes),
		IdleTimeout:                  s.ConnectionsMaxIdle,
		MaxConnectionsPerIP:          maxConnectionsPerIP(s.MaxConnectionsPerIP),
		MaxConnectionsPerIPOverrides: overrides,
		Logger:                       logger.With("component", "server"),
	}
	if pcfg.Watch != nil {
		// When this process dies, the other brokers' Watches hear of it
		// before its clients can ask them for metadata.
		scfg.ExitFirst = peer.IsPeer
	}
	if hasSASLListener(s.Listeners) {
		ctrl := d.ctrl
		scfg.SASL = &server.SASL{
			Mechanisms:      s.SASLEnabledMechanisms,
			PlainWithoutTLS: s.SASLPlainAllowPlaintext,
			MaxReceiveSize:  s.SASLMaxReceiveSize,
			// 0 in the settings means no delay; -1 says so to the server.
			FailedAuthenticationDelay: cmp.Or(s.FailedAuthenticationDelay, -1),
			// Each login reads the image of the moment: a user created or
			// deleted on any node counts once this node has applied it.
			Credentials: func(user, mechanism string) (auth.Credential, bool) {
				return ctrl.Image().ScramCredential(user, mechanism)
			},
		}
	}
	if s.MetricsListen != "" {
		d.metrics = metrics.New(metrics.Config{
			Source:          d,
			PartitionSeries: s.MetricsPartitionSeries,
			APINames:        map[int16]string{kafkaext.SkipDamagedKey: "SkipDamaged", kafkaext.RefetchKey: "Refetch"},
		})
		pcfg.FS = vfs.Timed(vfs.OS, d.metrics.ObserveFsync)
		scfg.Observer = d.metrics
	}
	// The server listens while the partitions open: one still opening
	// answers with a retriable error.
	d.parts, err = partition.Open(pcfg)
	if err != nil {
		return nil, err
	}
	if pcfg.PeerTLS != nil {
		// Share-group state and the other coordinators' requests go to
		// the other brokers' ssl:// listeners as this node too.
		d.peers = peer.NewPoolTLS(peer.PoolClientID+strconv.Itoa(int(s.NodeID)), pcfg.PeerTLS)
	} else {
		d.peers = peer.NewPool(peer.PoolClientID + strconv.Itoa(int(s.NodeID)))
	}
	d.producerIDs = controller.NewProducerIDs(d.ctrl, clk, pcfg.Logger, controller.ProducerIDBlockSize)
	d.coords = coordinator.NewSet(coordinator.SetConfig{Settings: s, Controller: d.ctrl, Hosted: d.parts, Peers: d.peers,
		ProducerIDs: d.producerIDs.Take, Clock: clk, Logger: pcfg.Logger})
	d.broker = broker.New(broker.Config{Settings: s, Controller: d.ctrl, Partitions: d.parts, Peers: d.peers,
		Coordinators: d.coords, Authorizer: auth.NewAuthorizer(auth.NodePolicy(s.SuperUsers, s.AllowEveryone())),
		ProducerIDs: d.producerIDs, VerifyTransactions: s.TxnPartitionVerification, Logger: pcfg.Logger, Clock: clk})
	scfg.MaxConnections = maxConnections(s.MaxConnections, d.parts.Files().Max(), logger)
	d.server, err = server.New(scfg, d.broker)
	if err != nil {
		return nil, err
	}
	if err := d.server.Start(); err != nil {
		if unsafe := (*server.UnsafeSocketDirError)(nil); errors.As(err, &unsafe) {
			return nil, &ConfigError{err}
		}
		return nil, err
	}
	if err := d.parts.Opened(ctx); err != nil {
		return nil, err
	}
	d.lost = d.parts.LostCommitted()
	if d.metrics != nil {
		// Scrapes read the broker, the server and the controller, all
		// open from here on.
		if d.metricsAddr, d.stopMetrics, err = d.metrics.Serve(s.MetricsListen, logger.With("component", "metrics")); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	addrs := d.server.Addrs()
	host, port, err := advertisedAddress(s.Advertise, addrs)
	if err != nil {
		return nil, err
	}
	d.registration = controller.Broker{ID: s.NodeID, Host: host, Port: port, Listeners: addrs, RaftAddr: raftAddr}
	if s.Rack != "" {
		rack := s.Rack
		d.registration.Rack = &rack
	}
	if testHookBeforeRegister != nil {
		testHookBeforeRegister(d)
	}
	if err := d.register(ctx); err != nil {
		return nil, err
	}
	d.startPrefetch()
	if err := d.parts.AwaitLeading(ctx); err != nil {
		return nil, fmt.Errorf("apply the metadata image with this broker's registration: %w", err)
	}
	d.startHeartbeat()
	d.parts.StartLogTasks()
	return d, nil
}

// testHookBeforeRegister, when set (by tests, before Start), is called by
// Start just before the node registers.
var testHookBeforeRegister func(*Daemon)

// testHookRegister, when set (by tests, before Start), is called before
// each attempt to register; an error it returns is that attempt's.
var testHookRegister func(*Daemon) error

// queuedMaxRequestBytes is queued.max.request.bytes for server.Config:
// Kafka's "no bound" (any value up to 0) is the server's negative.
func queuedMaxRequestBytes(v int64) int64 {
	if v <= 0 {
		return -1
	}
	return v
}

// maxConnections is max.connections for server.Config: the setting, or
// when 0 (mq's default) three quarters of the open-files limit
// (RLIMIT_NOFILE) left once segmentFiles (log.max.open.files in effect)
// are open, at least 16. The quarter held back is for what else needs
// descriptors: listeners, the controller's Raft log and connections,
// replica fetchers to other brokers, checkpoints and directory fsyncs.
// With the soft limit of 1024 that many systems start with, 384 (the
// log files take 512); with systemd's 524288, 196608.
func maxConnections(setting int32, segmentFiles int, logger *slog.Logger) int {
	if setting > 0 {
		return int(setting)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	spare := int64(min(rl.Cur, 1<<30)) - int64(segmentFiles)
	n := int(max(spare*3/4, 16))
	logger.Debug("max.connections from the open-files limit", "max_connections", n, "nofile", rl.Cur, "log_max_open_files", segmentFiles)
	return n
}

// maxConnectionsPerIP is max.connections.per.ip for server.Config:
// Kafka's 0 (none, but for the overrides) is the server's negative.
func maxConnectionsPerIP(v int32) int {
	if v == 0 {
		return -1
	}
	return int(v)
}

// newTLS reads the certificate and key of the ssl:// listeners, and the
// client CAs, when ssl.certificate.location is set; nil otherwise.
func newTLS(s config.Broker) (*server.TLS, error) {
	if s.SSLCertificateLocation == "" {
		return nil, nil
	}
	return server.NewTLS(server.TLSFiles{
		Cert:       s.SSLCertificateLocation,
		Key:        s.SSLKeyLocation,
		CA:         s.SSLCALocation,
		ClientAuth: server.ClientAuth(s.SSLClientAuth),
	})
}

// ReloadTLS reads the TLS files again (mqd does on SIGHUP): the ssl://
// listeners' certificate, key and client CAs, and this node's identity on
// the controller port (controller.ssl.*). Connections made afterwards use
// them, those open keep theirs. Files that do not load are reported and
// what they replaced stays in use. Without any TLS settings it does
// nothing and returns ErrNoTLS.
func (d *Daemon) ReloadTLS() error {
	if d.tls == nil && d.nodeTLS == nil {
		return ErrNoTLS
	}
	var errs []error
	if d.tls != nil {
		errs = append(errs, d.tls.Reload())
	}
	if d.nodeTLS != nil {
		errs = append(errs, d.nodeTLS.Reload())
	}
	return errors.Join(errs...)
}

// TLSCertificate is the certificate the ssl:// listeners present to new
// connections, or without them the one this node presents on the
// controller port; nil without TLS settings.
func (d *Daemon) TLSCertificate() *x509.Certificate {
	switch {
	case d.tls != nil:
		return d.tls.Certificate()
	case d.nodeTLS != nil:
		return d.nodeTLS.Certificate()
	}
	return nil
}

// newNodeTLS reads this node's certificate, key and cluster CA for the
// controller port when controller.ssl.certificate.location is set
// (config.Load checked that the three come together); nil otherwise.
func newNodeTLS(s config.Broker) (*controller.TLS, error) {
	if s.ControllerSSLCertificateLocation == "" {
		return nil, nil
	}
	return controller.NewTLS(controller.TLSFiles{
		Cert: s.ControllerSSLCertificateLocation,
		Key:  s.ControllerSSLKeyLocation,
		CA:   s.ControllerSSLCALocation,
	})
}

// ErrNoTLS is ReloadTLS's answer when mqd has no TLS settings.
var ErrNoTLS = errors.New("node: no TLS certificate configured")

// hasSASLListener reports whether a listener authenticates with SASL.
func hasSASLListener(listeners []string) bool {
	for _, l := range listeners {
		if strings.HasPrefix(l, "sasl_plaintext://") || strings.HasPrefix(l, "sasl_ssl://") {
			return true
		}
	}
	return false
}

// advertisedAddress is the host and port this broker gives clients: the
// advertised address, else the first TCP listener's, else the first
// ssl://, sasl_ssl:// or sasl_plaintext:// listener's, in that order (a
// node that serves only those).
func advertisedAddress(advertise string, listeners []string) (string, int32, error) {
	hostPort := strings.TrimPrefix(advertise, "tcp://")
	for _, scheme := range []string{"tcp://", "ssl://", "sasl_ssl://", "sasl_plaintext://"} {
		for _, l := range listeners {
			if hostPort == "" && strings.HasPrefix(l, scheme) {
				hostPort = strings.TrimPrefix(l, scheme)
			}
		}
	}
	if hostPort == "" {
		return "localhost", 0, nil
	}
	host, portText, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "", 0, fmt.Errorf("advertised address %q: %w", hostPort, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("advertised address %q: bad port", hostPort)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		// Listening on every address: clients need a name that reaches us.
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		} else {
			host = "localhost"
		}
	}
	return host, int32(port), nil
}

// Addrs returns the addresses actually listened on, in the order of the
// listeners setting, with TCP port 0 resolved: "tcp://127.0.0.1:40123",
// "unix:///run/mq/mqd.sock".
func (d *Daemon) Addrs() []string { return d.server.Addrs() }

// MetricsAddr returns the host:port the metrics are served on, empty
// when metrics.listen is not set.
func (d *Daemon) MetricsAddr() string { return d.metricsAddr }

// Settings returns the settings the daemon was started with.
func (d *Daemon) Settings() config.Broker { return d.settings }

// Shutdown stops the node. First, in a cluster and with
// controlled.shutdown.enable, it asks the controller to move this broker's
// leaderships to other in-sync replicas and waits (up to
// controlled.shutdown.timeout.ms) until they have moved, still serving, so
// that clients are redirected rather than cut off. Then the server stops
// accepting and drains the connections (requests already read are answered; when ctx ends first,
// the rest are cut), then the broker flushes and closes its logs, the
// controller closes, and the data directory is unlocked. Calling it again
// returns the first call's result.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.shutdownOnce.Do(func() {
		d.controlledShutdown(ctx)
		d.shutdownErr = d.closeParts(ctx)
	})
	return d.shutdownErr
}

// closeParts stops whatever Start got to, in reverse order.
func (d *Daemon) closeParts(ctx context.Context) error {
	var errs []error
	if d.stopMetrics != nil {
		d.stopMetrics()
	}
	if d.stopHeartbeat != nil {
		d.stopHeartbeat()
		<-d.heartbeatDone
	}
	if d.stopPrefetch != nil {
		d.stopPrefetch()
		<-d.prefetchDone
	}
	if d.server != nil {
		if err := d.server.Shutdown(ctx); err != nil && !errors.Is(err, server.ErrClosed) {
			errs = append(errs, fmt.Errorf("shut down server: %w", err))
		}
	}
	if d.coords != nil {
		d.coords.Close()
	}
	if d.peers != nil {
		d.peers.Close()
	}
	if d.parts != nil {
		if err := d.parts.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close partitions: %w", err))
		}
	}
	if d.ctrl != nil {
		if err := d.ctrl.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close controller: %w", err))
		}
	}
	if d.lock != nil {
		if err := d.lock.release(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dataDirLock is an exclusive flock on DataDir/.lock, held while the file
// is open; the kernel releases it when the process dies, so a crashed mqd
// never leaves a stale lock.
type dataDirLock struct{ f *os.File }

func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &DataDirInUseError{Dir: dir, PID: readPID(path)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		flock(f, syscall.LOCK_UN)
		f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &dataDirLock{f: f}, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// readPID reads the pid a lock holder wrote, 0 if there is none.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// release empties the pid and unlocks. The file stays: removing it would
// let a starting mqd lock a new file while another still holds the old one.
func (l *dataDirLock) release() error {
	err := l.f.Truncate(0)
	if uerr := flock(l.f, syscall.LOCK_UN); err == nil {
		err = uerr
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("unlock data directory: %w", err)
	}
	return nil
}
