package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/version"
)

// TestApiVersionsNameMqAndItsRelease reads the broker's software from the
// ApiVersions response a kadm client gets, as mqctl cluster describe does.
func TestApiVersionsNameMqAndItsRelease(t *testing.T) {
	tb := startBroker(t, "", nil)
	addr := serve(t, tb)
	adm := kadm.NewClient(newClient(t, addr))
	versions, err := adm.ApiVersions(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := versions[tb.cfg.Settings.NodeID]
	if !ok || v.Err != nil {
		t.Fatalf("ApiVersions of node %d: %v (found %v)", tb.cfg.Settings.NodeID, v.Err, ok)
	}
	if v.Raw().Version < 3 {
		t.Fatalf("ApiVersions answered at v%d; the field needs v3+", v.Raw().Version)
	}
	var sw kafkaext.Software
	found, err := kafkaext.Get(&v.Raw().UnknownTags, kafkaext.ApiVersions, &sw)
	if !found || err != nil {
		t.Fatalf("ApiVersions response without mq's software: found %v, %v", found, err)
	}
	if want := (kafkaext.Software{Name: "mq", Version: version.String()}); sw != want {
		t.Fatalf("software %+v, want %+v", sw, want)
	}
}
