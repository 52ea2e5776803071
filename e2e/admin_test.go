package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

func TestKadmTopicLifecycle(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	ctx := ctxFor(t, time.Minute)
	adm := b.admin()

	created, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("delete"), "retention.ms": kadm.StringPtr("60000")}, "life")
	if err != nil || created.Err != nil {
		t.Fatalf("create: %v %v", err, created.Err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "life"); err == nil {
		t.Fatal("second create of the same topic succeeded")
	}

	td, err := adm.ListTopics(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	d := td["life"]
	if d.Err != nil || len(d.Partitions) != 2 || d.ID != created.ID {
		t.Fatalf("describe: err %v, %d partitions, id %v want %v", d.Err, len(d.Partitions), d.ID, created.ID)
	}
	for _, p := range d.Partitions {
		if p.Leader != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
			t.Fatalf("partition %d: leader %d replicas %v isr %v", p.Partition, p.Leader, p.Replicas, p.ISR)
		}
	}

	configValue := func(name string) (string, kmsg.ConfigSource) {
		t.Helper()
		rc, err := adm.DescribeTopicConfigs(ctx, "life")
		if err != nil {
			t.Fatal(err)
		}
		c, err := rc.On("life", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Configs {
			if e.Key == name {
				return e.MaybeValue(), e.Source
			}
		}
		t.Fatalf("config %s not described", name)
		return "", 0
	}
	if v, src := configValue("retention.ms"); v != "60000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms = %q from source %v, want 60000 from the topic", v, src)
	}
	if v, _ := configValue("segment.bytes"); v != "1073741824" {
		t.Fatalf("segment.bytes default = %q", v)
	}

	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("120000")}}, "life")
	if err != nil || alt[0].Err != nil {
		t.Fatalf("alter: %v %v", err, alt)
	}
	if v, _ := configValue("retention.ms"); v != "120000" {
		t.Fatalf("retention.ms after alter = %q", v)
	}
	bad, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("soon")}}, "life")
	if err == nil && bad[0].Err == nil {
		t.Fatal("invalid retention.ms accepted")
	}

	if _, err := adm.CreatePartitions(ctx, 2, "life"); err != nil {
		t.Fatal(err)
	}
	td, _ = adm.ListTopics(ctx, "life")
	if n := len(td["life"].Partitions); n != 4 {
		t.Fatalf("partitions after adding 2: %d", n)
	}

	del, err := adm.DeleteTopics(ctx, "life")
	if err != nil || del["life"].Err != nil {
		t.Fatalf("delete: %v %v", err, del["life"].Err)
	}
	mqtest.WaitFor(t, "the deleted topic gone from the listing", func() (bool, string) {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return false, err.Error()
		}
		return !td.Has("life"), "topic still listed"
	})
}
