package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUnknownNamesSuggestTheNearestKnownOne(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{ValidateBrokerConfig("log.retention.hourz", "1"), `unknown property "log.retention.hourz" (did you mean log.retention.hours?)`},
		{ValidateBrokerConfig("num.partitons", "1"), `unknown property "num.partitons" (did you mean num.partitions?)`},
		{ValidateTopicConfig("retention.msx", "1"), `unknown property "retention.msx" (did you mean retention.ms?)`},
		{ValidateBrokerConfig("no.such", "1"), `unknown property "no.such"`},
	} {
		if c.err == nil || c.err.Error() != c.want || !errors.Is(c.err, ErrUnknownConfig) {
			t.Errorf("got %v, want %s", c.err, c.want)
		}
	}
}

func TestLoadReportsEveryRefusedPropertyAndIgnoresKafkaOnlyOnes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "server.properties")
	data := "process.roles=broker,controller\nnum.partitions=0\nnum.io.threads=8\nlog.segment.bytes=1\n"
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == "MQ_DEFAULT_REPLICATION_FACTOR" {
			return "x"
		}
		return ""
	}
	_, err := Load(file, env, nil)
	var list Errors
	if !errors.As(err, &list) || len(list) != 3 || !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("Load: %v; want 3 errors: lines 2 and 4, $MQ_DEFAULT_REPLICATION_FACTOR", err)
	}
	for i, want := range []string{file + ":2", file + ":4", "$MQ_DEFAULT_REPLICATION_FACTOR"} {
		if e := (*Error)(nil); !errors.As(list[i], &e) || e.Where != want {
			t.Errorf("error %d: %v, want one at %s", i, list[i], want)
		}
	}

	data = "process.roles=broker,controller\nnum.partitions=3\nnum.io.threads=8\n"
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Load(file, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.NumPartitions != 3 || len(b.Ignored) != 2 {
		t.Fatalf("num.partitions %d, ignored %q; want 3 and two lines", b.NumPartitions, b.Ignored)
	}
	if err := ValidateBrokerConfig("process.roles", "broker"); !errors.Is(err, ErrUnknownConfig) {
		t.Errorf("process.roles outside a config file: %v, want unknown", err)
	}
}

func TestUnknownEnvironmentNamesTyposOnly(t *testing.T) {
	got := UnknownEnvironment([]string{"MQ_NUM_PARTITIONS=3", "MQ_BROKER=x", "MQ_DATA_DIR=/d", "PATH=/bin",
		"MQ_BIN=bin", "MQ_CLUSTER_DIR=/tmp/c", "MQ_OFFSET=3", "MQ_HEADER_TRACE_ID=t",
		"MQ_LOG_RETENTION_HOURZ=1", "MQ_WHATEVER_ELSE=1"})
	want := []string{
		"$MQ_LOG_RETENTION_HOURZ is not an mq setting; ignored (did you mean $MQ_LOG_RETENTION_HOURS?)",
		"$MQ_WHATEVER_ELSE is not an mq setting; ignored",
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("warnings %q, want %q", got, want)
	}
}

func TestKafkaListenersSayHowMQWritesThem(t *testing.T) {
	file := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(file, []byte("listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(file, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "Kafka's PLAINTEXT://host:port is tcp://host:port here") || !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("Load: %v; want the refusal to say how mq writes listeners", err)
	}
	if err := os.WriteFile(file, []byte("listeners=tcp://host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file, nil, nil); err == nil || strings.Contains(err.Error(), "Kafka's") {
		t.Fatalf("Load of an mq listener without a port: %v; want a refusal without the Kafka hint", err)
	}
}
