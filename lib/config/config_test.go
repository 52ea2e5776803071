package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestDefaultsAreKafkas(t *testing.T) {
	b := defaultsFor(envOf(map[string]string{"HOME": "/home/u"}), 1000)
	want := Broker{
		NodeID:                       1,
		DataDir:                      "/home/u/.local/state/mq",
		Listeners:                    []string{"unix:///tmp/mq-1000/mqd.sock", "tcp://127.0.0.1:9092"},
		LogLevel:                     "info",
		LogFormat:                    "text",
		SSLClientAuth:                "none",
		SASLEnabledMechanisms:        []string{"SCRAM-SHA-256", "SCRAM-SHA-512"},
		SASLMaxReceiveSize:           524288,
		FailedAuthenticationDelay:    100 * time.Millisecond,
		InterBrokerProtocol:          "PLAINTEXT",
		MetricsPartitionSeries:       true,
		NumPartitions:                1,
		DefaultReplicationFactor:     1,
		AutoCreateTopics:             true,
		MinInsyncReplicas:            1,
		UncleanLeaderElection:        false,
		MessageMaxBytes:              1048588,
		SocketRequestMaxBytes:        104857600,
		QueuedMaxRequestBytes:        256 << 20, // mq's; Kafka's is -1
		ConnectionsMaxIdle:           10 * time.Minute,
		MaxConnectionsPerIP:          math.MaxInt32,
		MaxPartitionsPerRequest:      10000,
		MaxPartitions:                200000,
		AutoCreateTopicsPerRequest:   10,
		LogSegmentBytes:              1 << 30,
		LogRollMS:                    168 * 3600 * 1000,
		LogRetentionMS:               168 * 3600 * 1000,
		LogRetentionBytes:            -1,
		LogRetentionCheckInterval:    5 * time.Minute,
		RemoteLogReaderCacheBytes:    256 << 20,
		RemoteLogReaderTimeout:       10 * time.Second,
		RemoteLogManagerTaskInterval: 30 * time.Second,
		LogScrubBytesPerSec:          16 << 20,
		LogCleanerThreads:            1,
		LogCleanerDedupeBufferSize:   128 << 20,
		LogCleanerBackoff:            15 * time.Second,
		LogScrubInterval:             7 * 24 * time.Hour,
		LogFlushPolicy:               "os",
		LogFlushInterval:             time.Second,
		LogIndexIntervalBytes:        4096,
		LogMessageTimestampType:      "CreateTime",
		OffsetsTopicNumPartitions:    50,
		OffsetsRetention:             7 * 24 * time.Hour,
		GroupInitialRebalanceDelay:   3 * time.Second,
		GroupInitialRebalanceAlone:   500 * time.Millisecond,
		ShareRecordLockDuration:      30 * time.Second,
		ShareDeliveryAttemptLimit:    5,
		SharePartitionMaxLocks:       2000,
		ShareSessionTimeout:          45 * time.Second,
		ShareHeartbeatInterval:       5 * time.Second,
		ShareStateTopicPartitions:    50,

		BrokerSessionTimeout:                   9 * time.Second,
		BrokerHeartbeatInterval:                2 * time.Second,
		ProcessProbe:                           true,
		ControlledShutdown:                     true,
		ControlledShutdownTimeout:              30 * time.Second, // mq's
		ReplicaLagTime:                         30 * time.Second,
		TxnPartitionVerification:               true,
		NumReplicaFetchers:                     1,
		ReplicaFetchMaxBytes:                   1 << 20,
		ReplicaFetchResponseMaxBytes:           10 << 20,
		ReplicaFetchWait:                       500 * time.Millisecond,
		ReplicaFetchBackoff:                    time.Second,
		ReplicaHighWatermarkCheckpointInterval: 5 * time.Second,
		AutoLeaderRebalance:                    true,
		LeaderImbalanceCheckInterval:           300 * time.Second,
		OffsetsTopicReplicationFactor:          3,
		TransactionStateTopicPartitions:        50,
		TransactionStateReplicationFactor:      3,
		TransactionVersion:                     2, // mq's: Kafka 4 finalizes what its metadata.version allows
		TransactionMaxTimeout:                  15 * time.Minute,
		TransactionalIDExpiration:              7 * 24 * time.Hour,
		TransactionAbortCheckInterval:          10 * time.Second,
		LeaderReplicationThrottledRate:         math.MaxInt64,
		FollowerReplicationThrottledRate:       math.MaxInt64,
	}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", b, want)
	}
	td := b.TopicDefaults()
	wantTopic := Topic{
		CleanupPolicy:        "delete",
		SegmentBytes:         1 << 30,
		SegmentMS:            604800000,
		RetentionMS:          604800000,
		RetentionBytes:       -1,
		MaxMessageBytes:      1048588,
		MinInsyncReplicas:    1,
		FlushPolicy:          "os",
		FlushMS:              1000,
		IndexIntervalBytes:   4096,
		MessageTimestampType: "CreateTime",
		CompressionType:      "producer",
		// Kafka's: a day, none, none, half.
		DeleteRetentionMS: 86400000, MaxCompactionLagMS: math.MaxInt64, MinCleanableDirtyRatio: 0.5,
		// Kafka's: as retention.ms and retention.bytes.
		LocalRetentionMS: -2, LocalRetentionBytes: -2,
	}
	if td != wantTopic {
		t.Errorf("topic defaults:\n got %+v\nwant %+v", td, wantTopic)
	}
}

func TestDefaultDataDir(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"MQ_DATA_DIR": "/d", "XDG_STATE_HOME": "/s", "HOME": "/h"}, "/d"},
		{map[string]string{"XDG_STATE_HOME": "/s", "HOME": "/h"}, "/s/mq"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/h"}, "/h/.local/state/mq"},
		{map[string]string{"HOME": "/h"}, "/h/.local/state/mq"},
		{map[string]string{}, "/var/lib/mq"},
	} {
		if got := DefaultDataDir(envOf(tc.env)); got != tc.want {
			t.Errorf("DefaultDataDir(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

func TestDefaultSocket(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		uid  int
		want string
	}{
		{map[string]string{"MQ_SOCKET": "/x.sock", "XDG_RUNTIME_DIR": "/run/user/5"}, 5, "/x.sock"},
		{map[string]string{"XDG_RUNTIME_DIR": "/run/user/5"}, 5, "/run/user/5/mq/mqd.sock"},
		{map[string]string{"XDG_RUNTIME_DIR": "rel"}, 5, "/tmp/mq-5/mqd.sock"},
		{map[string]string{}, 0, "/run/mq/mqd.sock"},
		{map[string]string{}, 1234, "/tmp/mq-1234/mqd.sock"},
	} {
		if got := DefaultSocket(envOf(tc.env), tc.uid); got != tc.want {
			t.Errorf("DefaultSocket(%v, %d) = %q, want %q", tc.env, tc.uid, got, tc.want)
		}
	}
	got := DefaultListeners(envOf(map[string]string{"MQ_SOCKET": "/s"}), 1)
	if want := []string{"unix:///s", "tcp://127.0.0.1:9092"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultListeners = %q, want %q", got, want)
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mqd.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name       string
		file       string
		env        map[string]string
		flags      map[string]string
		want       int32
		wantSource Source
	}{
		{"defaults", "", nil, nil, 1, SourceDefault},
		{"file over defaults", "num.partitions = 2", nil, nil, 2, SourceStaticBroker},
		{"env over file", "num.partitions = 2", map[string]string{"MQ_NUM_PARTITIONS": "3"}, nil, 3, SourceStaticBroker},
		{"flags over env", "num.partitions = 2", map[string]string{"MQ_NUM_PARTITIONS": "3"}, map[string]string{"num.partitions": "4"}, 4, SourceStaticBroker},
		{"flags over file", "num.partitions = 2", nil, map[string]string{"num.partitions": "4"}, 4, SourceStaticBroker},
		{"empty env ignored", "num.partitions = 2", map[string]string{"MQ_NUM_PARTITIONS": ""}, nil, 2, SourceStaticBroker},
		{"set to the default is still static", "num.partitions = 1", nil, nil, 1, SourceStaticBroker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.file != "" {
				file = writeFile(t, tc.file+"\n")
			}
			b, err := Load(file, envOf(tc.env), tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			if b.NumPartitions != tc.want {
				t.Errorf("NumPartitions = %d, want %d", b.NumPartitions, tc.want)
			}
			if got := entry(t, DescribeBroker(b, nil), "num.partitions").Source; got != tc.wantSource {
				t.Errorf("source = %d, want %d", got, tc.wantSource)
			}
		})
	}
}

func TestLoadEnvironment(t *testing.T) {
	env := map[string]string{
		"HOME":                  "/h",
		"MQ_LOG_DIRS":           "/generic",
		"MQ_DATA_DIR":           "/data",
		"MQ_LISTEN":             "unix:///a.sock, tcp://0.0.0.0:0",
		"MQ_NODE_ID":            "7",
		"MQ_LOG_LEVEL":          "DEBUG",
		"MQ_LOG_FORMAT":         "json",
		"MQ_ADVERTISE":          "tcp://h.example:9092",
		"MQ_VOTERS":             "7@h1:9093,8@h2",
		"MQ_CONFIG":             "/ignored.conf",
		"MQ_SOCKET":             "/s.sock",
		"MQ_BROKER":             "tcp://somewhere:1",
		"MQ_LOG_CLEANUP_POLICY": "compact",
	}
	b, err := Load("", envOf(env), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.DataDir != "/data" || b.NodeID != 7 || b.LogLevel != "debug" || b.LogFormat != "json" ||
		b.Advertise != "h.example:9092" || b.Voters != "7@h1:9093,8@h2:9093" {
		t.Errorf("got %+v", b)
	}
	if want := []string{"unix:///a.sock", "tcp://0.0.0.0:0"}; !reflect.DeepEqual(b.Listeners, want) {
		t.Errorf("Listeners = %q, want %q", b.Listeners, want)
	}
	// A bare host:port is a TCP listener, as in the tools' -b.
	bare, err := Load("", envOf(map[string]string{"MQ_LISTEN": "127.0.0.1:9092,unix:///a.sock"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tcp://127.0.0.1:9092", "unix:///a.sock"}; !reflect.DeepEqual(bare.Listeners, want) {
		t.Errorf("Listeners from bare host:port = %q, want %q", bare.Listeners, want)
	}
	if b.TopicDefaults().CleanupPolicy != "compact" {
		t.Errorf("log.cleanup.policy from env not applied: %v", b.Extra)
	}

	// Without MQ_LISTEN the default listeners follow $MQ_SOCKET.
	b, err = Load("", envOf(map[string]string{"MQ_SOCKET": "/s.sock"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"unix:///s.sock", "tcp://127.0.0.1:9092"}; !reflect.DeepEqual(b.Listeners, want) {
		t.Errorf("Listeners = %q, want %q", b.Listeners, want)
	}
}

// max.connections.per.ip=0 lets no TCP client in but those of the
// overrides: without any, Load refuses it, as Kafka does.
func TestLoadRefusesNoConnectionsPerIPWithoutOverrides(t *testing.T) {
	_, err := Load("", envOf(nil), map[string]string{"max.connections.per.ip": "0"})
	if !errors.Is(err, ErrInvalidValue) || !strings.Contains(err.Error(), "max.connections.per.ip.overrides") {
		t.Fatalf("Load = %v, want an invalid value error naming the overrides", err)
	}
	b, err := Load("", envOf(nil), map[string]string{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "10.0.0.1:5"})
	if err != nil || b.MaxConnectionsPerIP != 0 || b.MaxConnectionsPerIPOverrides != "10.0.0.1:5" {
		t.Fatalf("with an override: %v %+v", err, b)
	}
}

// queued.max.request.bytes is checked against socket.request.max.bytes
// once every layer is applied, whichever layer set either.
func TestLoadRefusesRequestBudgetBelowLargestRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  string
		env   map[string]string
		flags map[string]string
		ok    bool
	}{
		{"defaults", "", nil, nil, true},
		{"budget equal to the largest request", "queued.max.request.bytes = 104857600", nil, nil, true},
		{"budget below the default largest request", "queued.max.request.bytes = 104857599", nil, nil, false},
		{"largest request raised above the default budget", "", map[string]string{"MQ_SOCKET_REQUEST_MAX_BYTES": "268435457"}, nil, false},
		{"both raised in different layers", "socket.request.max.bytes = 536870912", nil, map[string]string{"queued.max.request.bytes": "1073741824"}, true},
		{"no bound", "socket.request.max.bytes = 536870912", nil, map[string]string{"queued.max.request.bytes": "-1"}, true},
		{"zero is no bound, as in Kafka", "queued.max.request.bytes = 0", nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.file != "" {
				file = writeFile(t, tc.file+"\n")
			}
			_, err := Load(file, envOf(tc.env), tc.flags)
			if tc.ok && err != nil {
				t.Fatal(err)
			}
			if !tc.ok {
				if !errors.Is(err, ErrInvalidValue) {
					t.Fatalf("Load = %v, want an invalid value error", err)
				}
				if msg := err.Error(); !strings.Contains(msg, "queued.max.request.bytes") || !strings.Contains(msg, "socket.request.max.bytes") {
					t.Errorf("error %q does not name both properties", msg)
				}
			}
		})
	}
}

func TestLoadDurationUnitsMostSpecificWins(t *testing.T) {
	const hour, minute = 3_600_000, 60_000
	for _, tc := range []struct {
		name          string
		file          string
		env           map[string]string
		flags         map[string]string
		retention     int64
		roll          int64
		retentionFrom Source
	}{
		{"defaults", "", nil, nil, 168 * hour, 168 * hour, SourceDefault},
		{"hours", "log.retention.hours = 2\nlog.roll.hours = 3", nil, nil, 2 * hour, 3 * hour, SourceStaticBroker},
		{"minutes beat hours", "log.retention.hours = 2\nlog.retention.minutes = 5", nil, nil, 5 * minute, 168 * hour, SourceStaticBroker},
		{"ms beat minutes", "log.retention.ms = 7\nlog.retention.minutes = 5\nlog.roll.ms = 9\nlog.roll.hours=1", nil, nil, 7, 9, SourceStaticBroker},
		{"file ms beats flag hours", "log.retention.ms = 7", nil, map[string]string{"log.retention.hours": "1"}, 7, 168 * hour, SourceStaticBroker},
		{"env minutes beat flag hours", "", map[string]string{"MQ_LOG_RETENTION_MINUTES": "1"}, map[string]string{"log.retention.hours": "1"}, minute, 168 * hour, SourceStaticBroker},
		{"negative is forever", "log.retention.hours = -1", nil, nil, -1, 168 * hour, SourceStaticBroker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.file != "" {
				file = writeFile(t, tc.file)
			}
			b, err := Load(file, envOf(tc.env), tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			if b.LogRetentionMS != tc.retention || b.LogRollMS != tc.roll {
				t.Errorf("retention %d roll %d, want %d %d", b.LogRetentionMS, b.LogRollMS, tc.retention, tc.roll)
			}
			e := entry(t, DescribeTopic(b, nil), "retention.ms")
			if *e.Value != itoa(tc.retention) || e.Source != tc.retentionFrom {
				t.Errorf("retention.ms described as %s (source %d), want %d (source %d)", *e.Value, e.Source, tc.retention, tc.retentionFrom)
			}
		})
	}
}

func itoa(n int64) string { return fmtInt(n) }

func TestParseFile(t *testing.T) {
	text := "# comment\n\n  num.partitions=3  \r\nlog.dirs = /var/lib/mq # not a comment\n\tadvertised.listeners =\nlog.level = a = b\n"
	got, err := ParseFile("f", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []Property{
		{"num.partitions", "3", 3},
		{"log.dirs", "/var/lib/mq # not a comment", 4},
		{"advertised.listeners", "", 5},
		{"log.level", "a = b", 6},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestFileErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
		is               error
	}{
		{"no equals", "num.partitions = 1\n\nnum.partitions 3\n", ":3: want key = value", nil},
		{"no key", "# x\n = 3\n", ":2: missing property name", nil},
		{"space in key", "num partitions = 3\n", `:1: property name "num partitions" contains a space`, nil},
		{"duplicate", "num.partitions = 1\n#\nnum.partitions = 2\n", ":3: num.partitions already set on line 1", nil},
		{"unknown", "num.partitions = 1\nnum.partitons = 2\n", `:2: unknown property "num.partitons"`, ErrUnknownConfig},
		{"invalid", "\n\n\nnum.partitions = zero\n", `:4: invalid value "zero" for num.partitions: want an integer ≥ 1`, ErrInvalidValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, tc.text)
			_, err := Load(file, nil, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), file+":") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q after the file name", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not match %v", err, tc.is)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.conf"), nil, nil); err == nil || !strings.Contains(err.Error(), "missing.conf") {
		t.Errorf("missing file: %v", err)
	}
}

func TestLoadErrorsSayWhere(t *testing.T) {
	_, err := Load("", envOf(map[string]string{"MQ_NUM_PARTITIONS": "0"}), nil)
	if want := `$MQ_NUM_PARTITIONS: invalid value "0" for num.partitions: want an integer ≥ 1`; err == nil || err.Error() != want {
		t.Errorf("env: %v, want %s", err, want)
	}
	_, err = Load("", envOf(map[string]string{"MQ_LISTEN": "http://x"}), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "$MQ_LISTEN: invalid value") {
		t.Errorf("env alias: %v", err)
	}
	_, err = Load("", nil, map[string]string{"no.such": "1"})
	if want := `command line: unknown property "no.such"`; err == nil || err.Error() != want || !errors.Is(err, ErrUnknownConfig) {
		t.Errorf("flags: %v, want %s", err, want)
	}
}

// TestBrokerPropertyValidation covers every broker property's rule.
func TestBrokerPropertyValidation(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"node.id", "0", true}, {"node.id", "-1", false}, {"node.id", "x", false}, {"node.id", "2147483648", false},
		{"broker.id", "3", true}, {"broker.id", "-3", false},
		{"log.dirs", "/a/b", true}, {"log.dirs", "", false}, {"log.dirs", "/a,/b", false}, {"log.dir", "/a", true},
		{"listeners", "unix:///a,tcp://:9092", true}, {"listeners", "tcp://[::1]:0", true},
		{"listeners", "unix://rel", false}, {"listeners", "tcp://host", false}, {"listeners", "PLAINTEXT://:9092", false},
		{"listeners", "tcp://h:70000", false}, {"listeners", "", false}, {"listeners", " , ", false},
		{"listeners", "127.0.0.1:9092", true}, {"listeners", "unix:///a,:0", true}, {"listeners", "host", false}, {"listeners", "h:x", false},
		{"listeners", "ssl://0.0.0.0:9093", true}, {"listeners", "ssl://h", false}, {"listeners", "SSL://:9093", false},
		{"listeners", "sasl_plaintext://:9094,sasl_ssl://0.0.0.0:9095", true}, {"listeners", "sasl_ssl://h", false}, {"listeners", "SASL_SSL://:9095", false},
		{"sasl.enabled.mechanisms", "PLAIN,scram-sha-512", true}, {"sasl.enabled.mechanisms", "GSSAPI", false}, {"sasl.enabled.mechanisms", "", false},
		{"sasl.plain.allow.plaintext", "true", true}, {"sasl.plain.allow.plaintext", "maybe", false},
		{"sasl.server.max.receive.size", "524288", true}, {"sasl.server.max.receive.size", "0", false},
		{"connection.failed.authentication.delay.ms", "0", true}, {"connection.failed.authentication.delay.ms", "-1", false},
		{"ssl.client.auth", "required", true}, {"ssl.client.auth", "yes", false}, {"ssl.key.location", "", true},
		{"super.users", "User:alice; User:CN=a,O=b", true}, {"super.users", "", true}, {"super.users", "alice", false}, {"super.users", ":alice", false},
		{"allow.everyone.if.no.acl.found", "true", true}, {"allow.everyone.if.no.acl.found", "", true}, {"allow.everyone.if.no.acl.found", "maybe", false},
		{"ssl.certificate.location", "/etc/mq/./cert.pem", true}, {"ssl.ca.location", "ca.pem", true},
		{"security.inter.broker.protocol", "SSL", true}, {"security.inter.broker.protocol", "ssl", true}, {"security.inter.broker.protocol", "SASL_SSL", false},
		{"controller.ssl.certificate.location", "/etc/mq/node.pem", true}, {"controller.ssl.key.location", "", true}, {"controller.ssl.ca.location", "cluster-ca.pem", true},
		{"advertised.listeners", "", true}, {"advertised.listeners", "h:1", true}, {"advertised.listeners", "tcp://h:1", true},
		{"advertised.listeners", "h:0", false}, {"advertised.listeners", ":9092", false}, {"advertised.listeners", "h", false},
		{"controller.quorum.voters", "", true}, {"controller.quorum.voters", "1@h:9093,2@[::1]:9093,3@h3", true},
		{"controller.quorum.voters", "1@h:9093,1@g:9093", false}, {"controller.quorum.voters", "h:9093", false},
		{"controller.quorum.voters", "-1@h:1", false}, {"controller.quorum.voters", "1@h:0", false}, {"controller.quorum.voters", "1@::1", false},
		{"log.level", "debug", true}, {"log.level", "WARN", true}, {"log.level", "trace", false},
		{"log.format", "json", true}, {"log.format", "xml", false},
		{"metrics.listen", "", true}, {"metrics.listen", "tcp://127.0.0.1:0", true}, {"metrics.listen", "[::1]:9100", true},
		{"metrics.listen", "nonsense", false}, {"metrics.listen", "unix:///run/m.sock", false}, {"metrics.listen", "http://h:1", false},
		{"metrics.partition.series", "false", true}, {"metrics.partition.series", "off", false},
		{"socket.request.max.bytes", "1", true}, {"socket.request.max.bytes", "0", false},
		{"queued.max.request.bytes", "-1", true}, {"queued.max.request.bytes", "0", true}, {"queued.max.request.bytes", "4294967296", true},
		{"queued.max.request.bytes", "1.5", false}, {"queued.max.request.bytes", "256MiB", false},
		{"connections.max.idle.ms", "1", true}, {"connections.max.idle.ms", "0", false},
		{"max.connections", "0", true}, {"max.connections", "100", true}, {"max.connections", "-1", false},
		{"max.connections.per.ip", "0", true}, {"max.connections.per.ip", "2147483647", true}, {"max.connections.per.ip", "-1", false},
		{"max.connections.per.ip.overrides", "", true}, {"max.connections.per.ip.overrides", "127.0.0.1:200, [::1]:0", true},
		{"max.connections.per.ip.overrides", "host:5", false}, {"max.connections.per.ip.overrides", "127.0.0.1", false},
		{"max.connections.per.ip.overrides", "127.0.0.1:-1", false}, {"max.connections.per.ip.overrides", "127.0.0.1:1,127.0.0.1:2", false},
		{"max.partitions.per.request", "1", true}, {"max.partitions.per.request", "0", false},
		{"max.partitions", "1", true}, {"max.partitions", "0", false},
		{"auto.create.topics.max.per.request", "0", true}, {"auto.create.topics.max.per.request", "-1", false},
		{"log.retention.check.interval.ms", "1", true}, {"log.retention.check.interval.ms", "0", false},
		{"log.cleaner.threads", "0", true}, {"log.cleaner.threads", "2", true}, {"log.cleaner.threads", "-1", false},
		{"log.max.open.files", "0", true}, {"log.max.open.files", "64", true}, {"log.max.open.files", "-1", false}, {"log.max.open.files", "x", false},
		{"log.cleaner.dedupe.buffer.size", "1048576", true}, {"log.cleaner.dedupe.buffer.size", "1024", false},
		{"log.cleaner.backoff.ms", "100", true}, {"log.cleaner.backoff.ms", "0", false},
		{"log.scrub.bytes.per.sec", "0", true}, {"log.scrub.bytes.per.sec", "1048576", true}, {"log.scrub.bytes.per.sec", "-1", false},
		{"log.scrub.interval.ms", "1", true}, {"log.scrub.interval.ms", "0", false},
		{"offsets.topic.num.partitions", "1", true}, {"offsets.topic.num.partitions", "0", false},
		{"offsets.retention.minutes", "1", true}, {"offsets.retention.minutes", "0", false},
		{"group.initial.rebalance.delay.ms", "0", true}, {"group.initial.rebalance.delay.ms", "-1", false},
		{"group.share.record.lock.duration.ms", "100", true}, {"group.share.record.lock.duration.ms", "99", false},
		{"group.share.delivery.attempt.limit", "1", true}, {"group.share.delivery.attempt.limit", "101", false},
		{"group.share.partition.max.record.locks", "100000", true}, {"group.share.partition.max.record.locks", "0", false},
		{"group.share.session.timeout.ms", "1000", true}, {"group.share.session.timeout.ms", "999", false},
		{"group.share.heartbeat.interval.ms", "100", true}, {"group.share.heartbeat.interval.ms", "x", false},
		{"share.coordinator.state.topic.num.partitions", "1", true}, {"share.coordinator.state.topic.num.partitions", "0", false},
		{"transaction.state.log.num.partitions", "1", true}, {"transaction.state.log.num.partitions", "0", false},
		{"transaction.state.log.replication.factor", "1", true}, {"transaction.state.log.replication.factor", "0", false},
		{"transaction.max.timeout.ms", "60000", true}, {"transaction.max.timeout.ms", "0", false},
		{"transactional.id.expiration.ms", "3600000", true}, {"transactional.id.expiration.ms", "x", false},
		{"transaction.abort.timed.out.transaction.cleanup.interval.ms", "100", true}, {"transaction.abort.timed.out.transaction.cleanup.interval.ms", "-1", false},
		{"transaction.version", "1", true}, {"transaction.version", "2", true}, {"transaction.version", "0", false}, {"transaction.version", "3", false},
		{"group.initial.rebalance.alone.ms", "0", true}, {"group.initial.rebalance.alone.ms", "-1", false},
		{"default.replication.factor", "3", true}, {"default.replication.factor", "0", false}, {"default.replication.factor", "40000", false},
		{"num.partitions", "1", true}, {"num.partitions", "0", false}, {"num.partitions", "1.5", false},
		{"auto.create.topics.enable", "FALSE", true}, {"auto.create.topics.enable", "yes", false},
		{"min.insync.replicas", "1", true}, {"min.insync.replicas", "0", false},
		{"unclean.leader.election.enable", "true", true}, {"unclean.leader.election.enable", "1", false},
		{"message.max.bytes", "0", true}, {"message.max.bytes", "-1", false},
		{"log.segment.bytes", "14", true}, {"log.segment.bytes", "13", false}, {"log.segment.bytes", "4294967296", false},
		{"log.roll.hours", "1", true}, {"log.roll.hours", "0", false},
		{"log.roll.ms", "1", true}, {"log.roll.ms", "0", false},
		{"log.retention.hours", "-1", true}, {"log.retention.hours", "-2", false},
		{"log.retention.minutes", "-1", true}, {"log.retention.minutes", "-2", false},
		{"log.retention.ms", "-1", true}, {"log.retention.ms", "-2", false}, {"log.retention.ms", "9223372036854775807", true},
		{"log.retention.bytes", "-1", true}, {"log.retention.bytes", "x", false},
		{"remote.log.storage.url", "", true}, {"remote.log.storage.url", "file:///var/lib/mq/remote", true}, {"remote.log.storage.url", "file://relative", false},
		{"remote.log.storage.url", "s3://bucket?endpoint=http://127.0.0.1:8333&region=us-east-1", true}, {"remote.log.storage.url", "s3://", false}, {"remote.log.storage.url", "http://x", false},
		{"remote.log.reader.cache.bytes", "0", true}, {"remote.log.reader.cache.bytes", "-1", false},
		{"remote.log.reader.timeout.ms", "1", true}, {"remote.log.reader.timeout.ms", "0", false},
		{"remote.log.manager.task.interval.ms", "1", true}, {"remote.log.manager.task.interval.ms", "0", false},
		{"log.flush.policy", "interval", true}, {"log.flush.policy", "never", false},
		{"log.flush.interval.ms", "0", true}, {"log.flush.interval.ms", "-1", false},
		{"log.index.interval.bytes", "0", true}, {"log.index.interval.bytes", "-1", false},
		{"log.message.timestamp.type", "LogAppendTime", true}, {"log.message.timestamp.type", "logappendtime", true}, {"log.message.timestamp.type", "Now", false},
		{"log.cleanup.policy", "compact, delete", true}, {"log.cleanup.policy", "", false}, {"log.cleanup.policy", "archive", false},
		{"compression.type", "zstd", true}, {"compression.type", "uncompressed", true}, {"compression.type", "brotli", false},
		{"log.cleaner.delete.retention.ms", "0", true}, {"log.cleaner.delete.retention.ms", "-1", false},
		{"log.cleaner.min.compaction.lag.ms", "0", true}, {"log.cleaner.min.compaction.lag.ms", "-1", false},
		{"log.cleaner.max.compaction.lag.ms", "1", true}, {"log.cleaner.max.compaction.lag.ms", "0", false},
		{"log.cleaner.min.cleanable.ratio", "0.9", true}, {"log.cleaner.min.cleanable.ratio", "1.1", false}, {"log.cleaner.min.cleanable.ratio", "NaN", false},
		{"log.roll.jitter.ms", "0", true}, {"log.roll.jitter.ms", "-1", false},
		{"log.segment.delete.delay.ms", "0", true}, {"log.segment.delete.delay.ms", "-1", false},
		{"log.message.timestamp.difference.max.ms", "0", true}, {"log.message.timestamp.difference.max.ms", "-1", false},
		{"log.preallocate", "true", true}, {"log.preallocate", "maybe", false},
		{"controller.raft.address", "10.0.0.4:9093", true}, {"controller.raft.address", "", true}, {"controller.raft.address", "nohost", false},
		{"broker.rack", "eu-west-1a", true}, {"broker.rack", "", true}, {"broker.rack", "a,b", false}, {"broker.rack", "a b", false},
		{"broker.session.timeout.ms", "9000", true}, {"broker.session.timeout.ms", "0", false},
		{"broker.heartbeat.interval.ms", "100", true}, {"broker.heartbeat.interval.ms", "0", false},
		{"broker.process.probe.enable", "false", true}, {"broker.process.probe.enable", "no", false},
		{"controlled.shutdown.enable", "false", true}, {"controlled.shutdown.enable", "no", false},
		{"controlled.shutdown.timeout.ms", "1", true}, {"controlled.shutdown.timeout.ms", "0", false},
		{"replica.lag.time.max.ms", "1", true}, {"replica.lag.time.max.ms", "0", false},
		{"transaction.partition.verification.enable", "false", true}, {"transaction.partition.verification.enable", "no", false},
		{"num.replica.fetchers", "4", true}, {"num.replica.fetchers", "0", false},
		{"replica.fetch.max.bytes", "1", true}, {"replica.fetch.max.bytes", "0", false},
		{"replica.fetch.response.max.bytes", "1", true}, {"replica.fetch.response.max.bytes", "0", false},
		{"replica.fetch.wait.max.ms", "0", true}, {"replica.fetch.wait.max.ms", "-1", false},
		{"replica.fetch.backoff.ms", "0", true}, {"replica.fetch.backoff.ms", "-1", false},
		{"replica.high.watermark.checkpoint.interval.ms", "1", true}, {"replica.high.watermark.checkpoint.interval.ms", "0", false},
		{"auto.leader.rebalance.enable", "false", true}, {"auto.leader.rebalance.enable", "off", false},
		{"leader.imbalance.check.interval.seconds", "1", true}, {"leader.imbalance.check.interval.seconds", "0", false},
		{"offsets.topic.replication.factor", "1", true}, {"offsets.topic.replication.factor", "0", false}, {"offsets.topic.replication.factor", "40000", false},
		{"leader.replication.throttled.rate", "0", true}, {"leader.replication.throttled.rate", "-1", false},
		{"follower.replication.throttled.rate", "2097152", true}, {"follower.replication.throttled.rate", "fast", false},
		{"replication.throttle.auto.target.ms", "50", true}, {"replication.throttle.auto.target.ms", "-1", false},
	} {
		covered[tc.name] = true
		b := Defaults()
		err := b.Set(tc.name, tc.value)
		if tc.ok && err != nil {
			t.Errorf("Set(%s, %q): %v", tc.name, tc.value, err)
		}
		if !tc.ok {
			if !errors.Is(err, ErrInvalidValue) {
				t.Errorf("Set(%s, %q) = %v, want an invalid value error", tc.name, tc.value, err)
			} else if msg := err.Error(); !strings.Contains(msg, tc.name) || !strings.Contains(msg, tc.value) || !strings.Contains(msg, "want ") {
				t.Errorf("error %q does not name property, value and what is allowed", msg)
			}
		}
		if got := ValidateBrokerConfig(tc.name, tc.value); (got == nil) != tc.ok {
			t.Errorf("ValidateBrokerConfig(%s, %q) = %v", tc.name, tc.value, got)
		}
	}
	for _, name := range Properties() {
		if !covered[name] {
			t.Errorf("no validation case for %s", name)
		}
	}
	b := Defaults()
	if err := b.Set("no.such.property", "1"); !errors.Is(err, ErrUnknownConfig) || err.Error() != `unknown property "no.such.property"` {
		t.Errorf("unknown property: %v", err)
	}
}

func TestSetNormalizesAndStores(t *testing.T) {
	b := Defaults()
	for _, kv := range [][2]string{
		{"broker.id", " 9 "}, {"log.dir", "/x/../y/"}, {"log.level", "ERROR"}, {"auto.create.topics.enable", "False"},
		{"log.cleanup.policy", "delete,compact"}, {"log.message.timestamp.type", "logappendtime"},
		{"connections.max.idle.ms", "1500"}, {"offsets.retention.minutes", "2"}, {"default.replication.factor", "3"},
	} {
		if err := b.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if b.NodeID != 9 || b.DataDir != "/y" || b.LogLevel != "error" || b.AutoCreateTopics ||
		b.LogMessageTimestampType != "LogAppendTime" || b.ConnectionsMaxIdle != 1500*time.Millisecond ||
		b.OffsetsRetention != 2*time.Minute || b.DefaultReplicationFactor != 3 {
		t.Errorf("got %+v", b)
	}
	if b.Extra["log.cleanup.policy"] != "compact,delete" {
		t.Errorf("Extra = %v", b.Extra)
	}
	// Aliases are described under the real name.
	if e := entry(t, DescribeBroker(b, nil), "node.id"); *e.Value != "9" || e.Source != SourceStaticBroker {
		t.Errorf("node.id entry %+v", e)
	}
}

func TestSetDoesNotChangeCopies(t *testing.T) {
	a := Defaults()
	if err := a.Set("log.cleanup.policy", "compact"); err != nil {
		t.Fatal(err)
	}
	b := a
	if err := b.Set("log.cleanup.policy", "delete"); err != nil {
		t.Fatal(err)
	}
	if err := b.Set("num.partitions", "5"); err != nil {
		t.Fatal(err)
	}
	if a.Extra["log.cleanup.policy"] != "compact" || entry(t, DescribeBroker(a, nil), "num.partitions").Source != SourceDefault {
		t.Errorf("Set on a copy changed the original: %v", a.Extra)
	}
}

// TestTopicConfigValidation covers every topic config's rule.
func TestTopicConfigValidation(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"cleanup.policy", "compact", true}, {"cleanup.policy", "compact,delete", true}, {"cleanup.policy", "Delete", true},
		{"cleanup.policy", "", false}, {"cleanup.policy", "compact,,delete", false}, {"cleanup.policy", "none", false},
		{"segment.bytes", "14", true}, {"segment.bytes", "13", false}, {"segment.bytes", "2147483648", false}, {"segment.bytes", "1k", false},
		{"segment.ms", "1", true}, {"segment.ms", "0", false},
		{"retention.ms", "-1", true}, {"retention.ms", "0", true}, {"retention.ms", "-2", false}, {"retention.ms", "9223372036854775808", false},
		{"retention.bytes", "-1", true}, {"retention.bytes", "1073741824", true}, {"retention.bytes", "", false},
		{"remote.storage.enable", "true", true}, {"remote.storage.enable", "yes", false},
		{"local.retention.ms", "-2", true}, {"local.retention.ms", "0", true}, {"local.retention.ms", "-3", false},
		{"local.retention.bytes", "-2", true}, {"local.retention.bytes", "1024", true}, {"local.retention.bytes", "-3", false},
		{"max.message.bytes", "0", true}, {"max.message.bytes", "-1", false},
		{"min.insync.replicas", "1", true}, {"min.insync.replicas", "0", false},
		{"flush.policy", "always", true}, {"flush.policy", "sometimes", false},
		{"flush.ms", "0", true}, {"flush.ms", "-1", false},
		{"index.interval.bytes", "0", true}, {"index.interval.bytes", "-1", false},
		{"message.timestamp.type", "CreateTime", true}, {"message.timestamp.type", "Never", false},
		{"unclean.leader.election.enable", "false", true}, {"unclean.leader.election.enable", "no", false},
		{"compression.type", "producer", true}, {"compression.type", "lz4", true}, {"compression.type", "none", true}, {"compression.type", "lzma", false},
		{"delete.retention.ms", "0", true}, {"delete.retention.ms", "-1", false},
		{"min.compaction.lag.ms", "0", true}, {"min.compaction.lag.ms", "-1", false},
		{"max.compaction.lag.ms", "1", true}, {"max.compaction.lag.ms", "0", false},
		{"min.cleanable.dirty.ratio", "0", true}, {"min.cleanable.dirty.ratio", "1", true}, {"min.cleanable.dirty.ratio", "-0.1", false},
		{"segment.jitter.ms", "0", true}, {"segment.jitter.ms", "-1", false},
		{"file.delete.delay.ms", "0", true}, {"file.delete.delay.ms", "-1", false},
		{"message.timestamp.difference.max.ms", "0", true}, {"message.timestamp.difference.max.ms", "-1", false},
		{"preallocate", "true", true}, {"preallocate", "yes", false},
		{"leader.replication.throttled.replicas", "", true}, {"leader.replication.throttled.replicas", "*", true},
		{"leader.replication.throttled.replicas", "0:1,1:2", true}, {"leader.replication.throttled.replicas", "0:x", false},
		{"follower.replication.throttled.replicas", "0:1", true}, {"follower.replication.throttled.replicas", "*,0:1", false},
	} {
		covered[tc.name] = true
		err := ValidateTopicConfig(tc.name, tc.value)
		if tc.ok && err != nil {
			t.Errorf("ValidateTopicConfig(%s, %q): %v", tc.name, tc.value, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidValue) {
			t.Errorf("ValidateTopicConfig(%s, %q) = %v, want an invalid value error", tc.name, tc.value, err)
		}
	}
	if err := ValidateTopicConfig("retention.hours", "1"); !errors.Is(err, ErrUnknownConfig) {
		t.Errorf("unknown topic config: %v", err)
	}
	for _, p := range topicProperties {
		if !covered[p.name] {
			t.Errorf("no validation case for %s", p.name)
		}
	}
}

func TestResolveTopic(t *testing.T) {
	b := Defaults()
	for _, kv := range [][2]string{{"log.retention.hours", "1"}, {"log.segment.bytes", "1000"}, {"compression.type", "zstd"}, {"log.flush.policy", "always"}} {
		if err := b.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ResolveTopic(b, map[string]string{
		"segment.bytes":                  "2000",
		"cleanup.policy":                 "compact",
		"unclean.leader.election.enable": "true",
		"preallocate":                    "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := b.TopicDefaults()
	want.SegmentBytes, want.CleanupPolicy, want.UncleanLeaderElection = 2000, "compact", true
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got.RetentionMS != 3_600_000 || got.CompressionType != "zstd" || got.FlushPolicy != "always" {
		t.Errorf("broker defaults not inherited: %+v", got)
	}

	for overrides, is := range map[string]error{"retention.ms=-5": ErrInvalidValue, "retention.hours=1": ErrUnknownConfig} {
		k, v, _ := strings.Cut(overrides, "=")
		if _, err := ResolveTopic(b, map[string]string{k: v}); !errors.Is(err, is) {
			t.Errorf("ResolveTopic(%s) = %v, want %v", overrides, err, is)
		}
	}
}

func entry(t *testing.T, entries []Entry, name string) Entry {
	t.Helper()
	for _, e := range entries {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no entry %q", name)
	return Entry{}
}

func TestDescribeTopicSources(t *testing.T) {
	b := Defaults()
	if err := b.Set("log.retention.ms", "5000"); err != nil {
		t.Fatal(err)
	}
	b.LogSegmentBytes = 12345 // assigned directly: still not the default
	b, err := b.WithDynamic(map[string]string{"compression.type": "lz4"}, map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		t.Fatal(err)
	}
	entries := DescribeTopic(b, map[string]string{"cleanup.policy": "delete, compact", "max.message.bytes": "100", "bogus": "1"})
	for _, tc := range []struct {
		name, value string
		source      Source
	}{
		{"cleanup.policy", "compact,delete", SourceDynamicTopic},
		{"max.message.bytes", "100", SourceDynamicTopic},
		{"retention.ms", "5000", SourceStaticBroker},
		{"segment.bytes", "12345", SourceStaticBroker},
		{"compression.type", "lz4", SourceDynamicDefaultBroker},
		{"min.insync.replicas", "2", SourceDynamicBroker},
		{"segment.ms", "604800000", SourceDefault},
		{"flush.policy", "os", SourceDefault},
		{"delete.retention.ms", "86400000", SourceDefault},
		{"leader.replication.throttled.replicas", "", SourceDefault},
	} {
		e := entry(t, entries, tc.name)
		if e.Value == nil || *e.Value != tc.value || e.Source != tc.source || e.ReadOnly {
			t.Errorf("%s: value %v source %d read-only %v, want %q source %d", tc.name, deref(e.Value), e.Source, e.ReadOnly, tc.value, tc.source)
		}
	}
	if len(entries) != len(topicProperties) {
		t.Errorf("%d entries, want one per topic config (%d)", len(entries), len(topicProperties))
	}
	for i := 1; i < len(entries); i++ {
		if entries[i-1].Name >= entries[i].Name {
			t.Errorf("entries not sorted: %s before %s", entries[i-1].Name, entries[i].Name)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestDescribeBroker(t *testing.T) {
	b, err := Load("", envOf(map[string]string{"MQ_DATA_DIR": "/d", "MQ_LOG_RETENTION_HOURS": "2"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	entries := DescribeBroker(b, map[string]string{"num.partitions": "3", "node.id": "5"})
	for _, tc := range []struct {
		name     string
		value    *string
		source   Source
		readOnly bool
	}{
		{"log.dirs", ptr("/d"), SourceStaticBroker, true},
		{"node.id", ptr("1"), SourceDefault, true}, // not dynamic: the dynamic value is ignored
		{"num.partitions", ptr("3"), SourceDynamicBroker, false},
		{"log.retention.hours", ptr("2"), SourceStaticBroker, false},
		{"log.retention.ms", nil, SourceDefault, false},
		{"log.cleanup.policy", ptr("delete"), SourceDefault, false},
		{"listeners", ptr("unix://" + DefaultSocket(envOf(nil), os.Getuid()) + ",tcp://127.0.0.1:9092"), SourceDefault, true},
		{"message.max.bytes", ptr("1048588"), SourceDefault, false},
	} {
		e := entry(t, entries, tc.name)
		if deref(e.Value) != deref(tc.value) || e.Source != tc.source || e.ReadOnly != tc.readOnly {
			t.Errorf("%s: %s source %d read-only %v, want %s source %d read-only %v",
				tc.name, deref(e.Value), e.Source, e.ReadOnly, deref(tc.value), tc.source, tc.readOnly)
		}
		if e.Doc == "" || e.Type == 0 {
			t.Errorf("%s: no doc or type", tc.name)
		}
	}
	for _, e := range entries {
		if e.Name == "broker.id" || e.Name == "log.dir" {
			t.Errorf("alias %s listed", e.Name)
		}
	}
}

func ptr(s string) *string { return &s }

func TestValidateBrokerDynamicConfig(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		is          []error
	}{
		{"log.retention.ms", "1000", nil},
		{"log.retention.hours", "1", nil},
		{"log.segment.bytes", "1048576", nil},
		{"log.cleanup.policy", "compact", nil},
		{"log.flush.policy", "always", nil},
		{"message.max.bytes", "2000000", nil},
		{"num.partitions", "3", nil},
		{"auto.create.topics.enable", "false", nil},
		{"min.insync.replicas", "2", nil},
		{"unclean.leader.election.enable", "true", nil},
		{"compression.type", "gzip", nil},
		{"num.partitions", "0", []error{ErrInvalidValue}},
		{"log.segment.bytes", "1", []error{ErrInvalidValue}},
		{"node.id", "2", []error{ErrNotDynamic, ErrInvalidValue}},
		{"listeners", "tcp://:1", []error{ErrNotDynamic, ErrInvalidValue}},
		{"log.dirs", "/x", []error{ErrNotDynamic}},
		{"log.retention.check.interval.ms", "1000", []error{ErrNotDynamic}},
		{"no.such", "1", []error{ErrUnknownConfig}},
	} {
		err := ValidateBrokerDynamicConfig(tc.name, tc.value)
		if len(tc.is) == 0 && err != nil {
			t.Errorf("%s=%s: %v", tc.name, tc.value, err)
		}
		for _, is := range tc.is {
			if !errors.Is(err, is) {
				t.Errorf("%s=%s: %v, want %v", tc.name, tc.value, err, is)
			}
		}
	}
	err := ValidateBrokerDynamicConfig("node.id", "2")
	if want := "node.id cannot be changed while mqd runs; set it in the config file or on the command line"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestWithDynamicReportsRefused(t *testing.T) {
	b, err := Defaults().WithDynamic(map[string]string{"num.partitions": "x"}, map[string]string{"node.id": "3", "num.partitions": "4"})
	if !errors.Is(err, ErrInvalidValue) || !errors.Is(err, ErrNotDynamic) {
		t.Errorf("err = %v", err)
	}
	if b.NumPartitions != 4 || b.NodeID != 1 {
		t.Errorf("NumPartitions %d NodeID %d", b.NumPartitions, b.NodeID)
	}
}

func TestEnvNameAndProperties(t *testing.T) {
	if got := EnvName("log.retention.check.interval.ms"); got != "MQ_LOG_RETENTION_CHECK_INTERVAL_MS" {
		t.Errorf("EnvName = %s", got)
	}
	names := Properties()
	for i := range names {
		if i > 0 && names[i-1] >= names[i] {
			t.Errorf("Properties not sorted at %s", names[i])
		}
		if p := lookupBroker(names[i]); p == nil || p.kind.norm == nil || p.doc == "" {
			t.Errorf("%s: incomplete property", names[i])
		}
	}
}

// TestEverySettingIsDocumented walks the tables: every broker property
// (aliases folded into the property they spell) and every topic config is
// in BrokerSettings or TopicSettings with a doc, a default and the values
// it accepts, so mqd --help-config and the man page list it.
func TestEverySettingIsDocumented(t *testing.T) {
	documented := map[string]Setting{}
	for _, s := range BrokerSettings() {
		documented[s.Name] = s
		for _, a := range s.Aliases {
			documented[a] = s
		}
	}
	for _, p := range brokerProperties {
		s, ok := documented[p.name]
		switch {
		case !ok:
			t.Errorf("broker property %s: not in BrokerSettings", p.name)
		case p.alias != "" && s.Name != p.alias:
			t.Errorf("alias %s: documented under %s, want %s", p.name, s.Name, p.alias)
		case p.alias == "" && (p.doc == "" || s.Doc != p.doc || s.Default == "" || s.Allowed == "" || s.Dynamic != p.dynamic):
			t.Errorf("broker property %s: incomplete documentation %+v", p.name, s)
		}
	}
	topics := TopicSettings()
	if len(topics) != len(topicProperties) {
		t.Errorf("TopicSettings has %d configs, the table %d", len(topics), len(topicProperties))
	}
	for i, p := range topicProperties {
		if i >= len(topics) {
			break
		}
		s := topics[i]
		if s.Name != p.name || p.doc == "" || s.Doc != p.doc || s.Default == "" || s.Allowed == "" || !s.Dynamic || s.BrokerDefault != p.broker {
			t.Errorf("topic config %s: incomplete documentation %+v", p.name, s)
		}
		if p.broker != "" && lookupBroker(p.broker) == nil {
			t.Errorf("topic config %s: default from unknown broker property %s", p.name, p.broker)
		}
	}
}

func TestSettingDefaultsReadAsPeopleSayThem(t *testing.T) {
	byName := map[string]Setting{}
	for _, s := range append(BrokerSettings(), TopicSettings()...) {
		byName[s.Name] = s
	}
	for name, want := range map[string]string{
		"num.partitions":                        "1",
		"log.retention.hours":                   "168",
		"log.retention.ms":                      "unset: log.retention.hours applies",
		"log.retention.minutes":                 "unset: log.retention.hours applies",
		"log.roll.ms":                           "unset: log.roll.hours applies",
		"advertised.listeners":                  "empty",
		"retention.ms":                          "604800000", // from log.retention.hours
		"segment.ms":                            "604800000",
		"max.message.bytes":                     "1048588",
		"leader.replication.throttled.replicas": "empty",
	} {
		if got := byName[name].Default; got != want {
			t.Errorf("%s: Default %q, want %q", name, got, want)
		}
	}
	// Defaults that depend on the environment are described, not
	// computed here, so the man page is the same on every machine.
	if d := byName["log.dirs"].Default; !strings.Contains(d, "$XDG_STATE_HOME/mq") {
		t.Errorf("log.dirs: Default %q", d)
	}
	if a := byName["node.id"].Aliases; len(a) != 1 || a[0] != "broker.id" {
		t.Errorf("node.id aliases %q", a)
	}
}

func TestThrottledReplica(t *testing.T) {
	for _, tc := range []struct {
		list              string
		partition, broker int32
		want              bool
	}{
		{"", 0, 1, false},
		{"*", 7, 3, true},
		{"0:1,1:2", 0, 1, true},
		{"0:1,1:2", 1, 2, true},
		{"0:1,1:2", 1, 1, false},
		{"0:1,1:2", 2, 2, false},
		{"10:1", 1, 1, false},
		{"01:002", 1, 2, true},
	} {
		if got := ThrottledReplica(tc.list, tc.partition, tc.broker); got != tc.want {
			t.Errorf("ThrottledReplica(%q, %d, %d) = %v, want %v", tc.list, tc.partition, tc.broker, got, tc.want)
		}
	}
	// The canonical form of a list with spaces is what the topic holds.
	top, err := ResolveTopic(Defaults(), map[string]string{"leader.replication.throttled.replicas": "0:1, 1:2", "follower.replication.throttled.replicas": "*"})
	if err != nil {
		t.Fatal(err)
	}
	if !ThrottledReplica(top.LeaderThrottledReplicas, 1, 2) || !ThrottledReplica(top.FollowerThrottledReplicas, 5, 5) {
		t.Fatalf("resolved %q and %q", top.LeaderThrottledReplicas, top.FollowerThrottledReplicas)
	}
}

func TestReplicationThrottledRatesAreDynamic(t *testing.T) {
	b := Defaults()
	if b.LeaderReplicationThrottledRate != math.MaxInt64 || b.FollowerReplicationThrottledRate != math.MaxInt64 {
		t.Fatalf("defaults %d and %d, want no throttle", b.LeaderReplicationThrottledRate, b.FollowerReplicationThrottledRate)
	}
	for _, name := range []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"} {
		if err := ValidateBrokerDynamicConfig(name, "2000000"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := ValidateBrokerDynamicConfig(name, "-1"); err == nil {
			t.Errorf("%s: -1 accepted", name)
		}
	}
	b, err := b.WithDynamic(map[string]string{"leader.replication.throttled.rate": "1000"}, map[string]string{"follower.replication.throttled.rate": "2000"})
	if err != nil || b.LeaderReplicationThrottledRate != 1000 || b.FollowerReplicationThrottledRate != 2000 {
		t.Fatalf("with dynamic configs: %d, %d, %v", b.LeaderReplicationThrottledRate, b.FollowerReplicationThrottledRate, err)
	}
}

// TestAutoReplicationThrottleIsDynamicAndOffByDefault: mq's
// replication.throttle.auto.target.ms is 0 (off) unless set, for every
// broker or one, at runtime.
func TestAutoReplicationThrottleIsDynamicAndOffByDefault(t *testing.T) {
	b := Defaults()
	if b.ReplicationThrottleAutoTarget != 0 {
		t.Fatalf("default %v, want 0 (off)", b.ReplicationThrottleAutoTarget)
	}
	if err := ValidateBrokerDynamicConfig("replication.throttle.auto.target.ms", "25"); err != nil {
		t.Fatal(err)
	}
	b, err := b.WithDynamic(map[string]string{"replication.throttle.auto.target.ms": "100"}, map[string]string{"replication.throttle.auto.target.ms": "25"})
	if err != nil || b.ReplicationThrottleAutoTarget != 25*time.Millisecond {
		t.Fatalf("with dynamic configs: %v, %v", b.ReplicationThrottleAutoTarget, err)
	}
}

// An ssl:// listener needs a certificate and its key, and asking clients
// for certificates needs CAs to check them against: Load refuses the
// settings that miss one, whichever layer set the others.
func TestLoadChecksTLSSettingsTogether(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags map[string]string
		want  string // "" when accepted
	}{
		{"ssl listener with certificate and key", map[string]string{"listeners": "ssl://0.0.0.0:9093", "ssl.certificate.location": "/etc/mq/cert.pem", "ssl.key.location": "/etc/mq/key.pem"}, ""},
		{"mTLS required with a CA", map[string]string{"listeners": "ssl://:9093", "ssl.certificate.location": "c", "ssl.key.location": "k", "ssl.ca.location": "ca", "ssl.client.auth": "required"}, ""},
		{"ssl listener without certificate", map[string]string{"listeners": "ssl://:9093"}, "ssl.certificate.location: want a certificate file"},
		{"sasl_ssl listener without certificate", map[string]string{"listeners": "sasl_ssl://:9093"}, "ssl.certificate.location: want a certificate file"},
		{"sasl_plaintext listener needs no certificate", map[string]string{"listeners": "sasl_plaintext://:9093"}, ""},
		{"key without certificate", map[string]string{"ssl.key.location": "/k.pem"}, "ssl.certificate.location: want a certificate file for ssl.key.location /k.pem"},
		{"certificate without key", map[string]string{"listeners": "ssl://:9093", "ssl.certificate.location": "/c.pem"}, "ssl.key.location: want the private key file"},
		{"client auth without CA", map[string]string{"listeners": "ssl://:9093", "ssl.certificate.location": "c", "ssl.key.location": "k", "ssl.client.auth": "requested"}, "ssl.ca.location: want a file of CA certificates"},
		{"unknown client auth", map[string]string{"ssl.client.auth": "optional"}, `invalid value "optional" for ssl.client.auth: want one of none, requested, required`},
		{"controller TLS whole", map[string]string{"controller.ssl.certificate.location": "n.pem", "controller.ssl.key.location": "n-key.pem", "controller.ssl.ca.location": "ca.pem"}, ""},
		{"controller TLS without CA", map[string]string{"controller.ssl.certificate.location": "n.pem", "controller.ssl.key.location": "n-key.pem"}, "controller.ssl.ca.location: want the cluster CA file"},
		{"controller TLS without key", map[string]string{"controller.ssl.certificate.location": "n.pem", "controller.ssl.ca.location": "ca.pem"}, "controller.ssl.key.location: want the private key file"},
		{"controller TLS CA alone", map[string]string{"controller.ssl.ca.location": "ca.pem"}, "controller.ssl.certificate.location: want this node's certificate file"},
		{"inter-broker SSL", map[string]string{"listeners": "ssl://:9093", "ssl.certificate.location": "c", "ssl.key.location": "k", "ssl.ca.location": "ca", "ssl.client.auth": "requested",
			"controller.ssl.certificate.location": "n.pem", "controller.ssl.key.location": "n-key.pem", "controller.ssl.ca.location": "ca.pem", "security.inter.broker.protocol": "ssl"}, ""},
		{"inter-broker SSL without node certificate", map[string]string{"listeners": "ssl://:9093", "ssl.certificate.location": "c", "ssl.key.location": "k", "ssl.ca.location": "ca", "ssl.client.auth": "requested",
			"security.inter.broker.protocol": "SSL"}, "controller.ssl.certificate.location: want this node's certificate, which security.inter.broker.protocol SSL"},
		{"inter-broker SSL without client certificates", map[string]string{"listeners": "ssl://:9093", "ssl.certificate.location": "c", "ssl.key.location": "k",
			"controller.ssl.certificate.location": "n.pem", "controller.ssl.key.location": "n-key.pem", "controller.ssl.ca.location": "ca.pem", "security.inter.broker.protocol": "SSL"}, "ssl.client.auth"},
		{"inter-broker SSL without ssl listener", map[string]string{"controller.ssl.certificate.location": "n.pem", "controller.ssl.key.location": "n-key.pem", "controller.ssl.ca.location": "ca.pem", "security.inter.broker.protocol": "SSL"}, "listeners: want an ssl:// listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Load("", nil, tc.flags)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b.SSLCertificateLocation != tc.flags["ssl.certificate.location"] || b.SSLKeyLocation != tc.flags["ssl.key.location"] {
					t.Fatalf("got %q %q", b.SSLCertificateLocation, b.SSLKeyLocation)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error with %q", err, tc.want)
			}
		})
	}
	// Kafka's SSL://host:port is refused with how mq writes it.
	_, err := Load("", nil, map[string]string{"listeners": "SSL://:9093"})
	if err == nil || !strings.Contains(err.Error(), "SSL://host:port is ssl://host:port") {
		t.Fatalf("Load with SSL://: %v", err)
	}
}

func TestAllowEveryoneDefaultsByTheListeners(t *testing.T) {
	for _, tc := range []struct {
		listeners []string
		setting   string
		want      bool
	}{
		{[]string{"unix:///run/mq.sock", "tcp://127.0.0.1:9092"}, "", true},
		{[]string{"127.0.0.1:9092"}, "", true},
		{[]string{"tcp://127.0.0.1:9092", "ssl://:9093"}, "", false},
		{[]string{"sasl_ssl://:9094"}, "", false},
		{[]string{"ssl://:9093"}, "true", true},
		{[]string{"tcp://:9092"}, "false", false},
	} {
		b := Broker{Listeners: tc.listeners, AllowEveryoneIfNoACLFound: tc.setting}
		if got := b.AllowEveryone(); got != tc.want {
			t.Errorf("listeners %v, setting %q: AllowEveryone = %v, want %v", tc.listeners, tc.setting, got, tc.want)
		}
	}
}

func TestRemoteStorageRefusedForCompactedTopics(t *testing.T) {
	b := Defaults()
	for _, policy := range []string{"compact", "compact,delete"} {
		got, err := ResolveTopic(b, map[string]string{"remote.storage.enable": "true", "cleanup.policy": policy})
		if !errors.Is(err, ErrInvalidValue) || got.RemoteStorageEnable {
			t.Errorf("remote storage with cleanup.policy=%s: %v, enabled %v; want ErrInvalidValue, disabled", policy, err, got.RemoteStorageEnable)
		}
	}
	got, err := ResolveTopic(b, map[string]string{"remote.storage.enable": "true", "retention.bytes": "100"})
	if err != nil || !got.RemoteStorageEnable {
		t.Fatalf("remote storage with delete: %v %v", err, got.RemoteStorageEnable)
	}
	if ms, bytes := got.LocalRetention(); ms != got.RetentionMS || bytes != 100 {
		t.Fatalf("local retention -2 resolved to %d %d", ms, bytes)
	}
}

func TestLocalRetentionIsBoundedByRetention(t *testing.T) {
	for _, tc := range []struct{ local, whole, want int64 }{
		{-2, 100, 100}, {-2, -1, -1}, {-1, 100, 100}, {-1, -1, -1}, {50, 100, 50}, {200, 100, 100}, {50, -1, 50},
	} {
		got, _ := Topic{LocalRetentionMS: tc.local, RetentionMS: tc.whole, LocalRetentionBytes: tc.local, RetentionBytes: tc.whole}.LocalRetention()
		if got != tc.want {
			t.Errorf("local %d, retention %d: %d, want %d", tc.local, tc.whole, got, tc.want)
		}
	}
}
