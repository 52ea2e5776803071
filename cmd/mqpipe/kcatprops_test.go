package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/client"
)

func TestKcatPropertiesSetTheSecurity(t *testing.T) {
	f, err := kcatProperties(client.TLSFiles{}, []string{
		"security.protocol=SASL_SSL", "sasl.mechanisms=SCRAM-SHA-256", "sasl.username=alice", "sasl.password=pw",
		"ssl.ca.location=/ca.pem",
	})
	want := client.TLSFiles{CA: "/ca.pem", ForceTLS: true, SASL: client.SASL{Mechanism: "SCRAM-SHA-256", User: "alice", Password: "pw"}}
	if err != nil || f != want {
		t.Fatalf("got %+v, %v; want %+v", f, err, want)
	}
	f, err = kcatProperties(client.TLSFiles{}, []string{"security.protocol=sasl_plaintext", "sasl.mechanism=PLAIN", "sasl.username=a"})
	if err != nil || f.ForceTLS || f.SASL.Mechanism != "PLAIN" {
		t.Fatalf("sasl_plaintext: %+v, %v", f, err)
	}
}

func TestKcatPropertiesThatMakeNoSenseAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		props []string
		want  string
	}{
		{[]string{"security.protocol"}, "want KEY=VALUE"},
		{[]string{"security.protocol=kerberos"}, "want plaintext, ssl, sasl_plaintext or sasl_ssl"},
		{[]string{"compression.codec=lz4"}, "mqpipe takes security.protocol"},
		{[]string{"security.protocol=ssl", "sasl.username=a"}, "need sasl_plaintext or sasl_ssl"},
		{[]string{"security.protocol=sasl_plaintext", "sasl.username=a"}, "needs -X sasl.mechanisms"},
	} {
		_, err := kcatProperties(client.TLSFiles{}, tc.props)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != client.ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a usage error with %q", tc.props, err, tc.want)
		}
	}
}
