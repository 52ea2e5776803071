package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestGroupConfigValidation(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"share.auto.offset.reset", "earliest", true}, {"share.auto.offset.reset", "Latest", true}, {"share.auto.offset.reset", "none", false},
		{"share.record.lock.duration.ms", "100", true}, {"share.record.lock.duration.ms", "99", false}, {"share.record.lock.duration.ms", "3600001", false},
		{"share.delivery.count.limit", "1", true}, {"share.delivery.count.limit", "100", true}, {"share.delivery.count.limit", "0", false},
		{"share.session.timeout.ms", "1000", true}, {"share.session.timeout.ms", "999", false},
		{"share.heartbeat.interval.ms", "100", true}, {"share.heartbeat.interval.ms", "x", false},
		{"errors.deadletterqueue.topic.name", "", true}, {"errors.deadletterqueue.topic.name", "orders.dlq", true},
		{"errors.deadletterqueue.topic.name", "..", false}, {"errors.deadletterqueue.topic.name", "a/b", false},
		{"errors.deadletterqueue.topic.name", strings.Repeat("x", MaxTopicNameLength+1), false},
	} {
		covered[tc.name] = true
		err := ValidateGroupConfig(tc.name, tc.value)
		if tc.ok && err != nil {
			t.Errorf("ValidateGroupConfig(%s, %q): %v", tc.name, tc.value, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidValue) {
			t.Errorf("ValidateGroupConfig(%s, %q) = %v, want an invalid value error", tc.name, tc.value, err)
		}
	}
	err := ValidateGroupConfig("share.delivery.count.limt", "3")
	if !errors.Is(err, ErrUnknownConfig) || !strings.Contains(err.Error(), "share.delivery.count.limit") {
		t.Errorf("unknown group config: %v, want ErrUnknownConfig suggesting share.delivery.count.limit", err)
	}
	for _, p := range groupProperties {
		if !covered[p.name] {
			t.Errorf("no validation case for %s", p.name)
		}
	}
}

func TestResolveGroup(t *testing.T) {
	b := Defaults()
	if err := b.Set("group.share.delivery.attempt.limit", "7"); err != nil {
		t.Fatal(err)
	}
	want := Group{
		RecordLockDuration: 30 * time.Second, DeliveryCountLimit: 7,
		SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second,
	}
	if got := ResolveGroup(b, nil); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
	got := ResolveGroup(b, map[string]string{
		"share.auto.offset.reset": "EARLIEST", "share.record.lock.duration.ms": "1500",
		"errors.deadletterqueue.topic.name": "dlq", "share.session.timeout.ms": "5", // out of range: the default stays
	})
	want.Earliest, want.RecordLockDuration, want.DeadLetterTopic = true, 1500*time.Millisecond, "dlq"
	if got != want {
		t.Errorf("own values: got %+v, want %+v", got, want)
	}
}

func TestDescribeGroupSources(t *testing.T) {
	b := Defaults()
	if err := b.Set("group.share.session.timeout.ms", "60000"); err != nil {
		t.Fatal(err)
	}
	entries := DescribeGroup(b, map[string]string{"share.delivery.count.limit": "3"})
	for _, tc := range []struct {
		name, value string
		source      Source
	}{
		{"share.delivery.count.limit", "3", SourceGroupConfig},
		{"share.session.timeout.ms", "60000", SourceStaticBroker},
		{"share.heartbeat.interval.ms", "5000", SourceDefault},
		{"share.record.lock.duration.ms", "30000", SourceDefault},
		{"share.auto.offset.reset", "latest", SourceDefault},
		{"errors.deadletterqueue.topic.name", "", SourceDefault},
	} {
		e := entry(t, entries, tc.name)
		if e.Value == nil || *e.Value != tc.value || e.Source != tc.source {
			t.Errorf("%s: value %v source %d, want %q source %d", tc.name, deref(e.Value), e.Source, tc.value, tc.source)
		}
	}
	if len(entries) != len(groupProperties) {
		t.Errorf("%d entries, want %d", len(entries), len(groupProperties))
	}
}
