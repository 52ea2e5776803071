package node

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
)

// A user created through any node logs in on every node: the credential
// travels through the controller image, and each node's SASL listener
// reads the image of the moment.
func TestUserCreatedOnOneNodeLogsInOnEvery(t *testing.T) {
	c := startCluster(t, 3, func(s *config.Broker) {
		s.Listeners = append(s.Listeners, "sasl_plaintext://127.0.0.1:0")
		// The brokers replicate as User:ANONYMOUS over tcp://, and the
		// user is created from tcp:// too: no ACLs in this test.
		s.AllowEveryoneIfNoACLFound = "true"
	})
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "s3cret"}})
	if err != nil || altered.Error() != nil {
		t.Fatalf("create alice: %v, %v", err, altered.Error())
	}
	c.waitImage("alice's credential on every node", func(img *controller.Image) bool {
		_, ok := img.ScramCredential("alice", "SCRAM-SHA-512")
		return ok
	})
	for id, d := range c.Running() {
		var addr string
		for _, a := range d.Addrs() {
			if hp, ok := strings.CutPrefix(a, "sasl_plaintext://"); ok {
				addr = hp
			}
		}
		for _, tc := range []struct {
			password string
			ok       bool
		}{{"s3cret", true}, {"guess", false}} {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second),
				kgo.SASL(scram.Auth{User: "alice", Pass: tc.password}.AsSha512Mechanism()))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			cl.Close()
			if (err == nil) != tc.ok {
				t.Fatalf("node %d, password %q: %v", id, tc.password, err)
			}
			if !tc.ok {
				continue
			}
			// The other brokers are given at their SASL listeners too.
			for _, b := range resp.Brokers {
				other := c.Get(b.NodeID)
				if other == nil {
					continue
				}
				if got := "sasl_plaintext://" + b.Host + ":" + strconv.Itoa(int(b.Port)); !strings.Contains(strings.Join(other.Addrs(), ","), got) {
					t.Fatalf("node %d gives broker %d as %s, not one of its listeners %v", id, b.NodeID, got, other.Addrs())
				}
			}
		}
	}
}
