package partition

import (
	"testing"

	"github.com/mqproject/mq/lib/controller"
)

// With security.inter.broker.protocol SSL a follower fetches from its
// leader's ssl:// listener: its host, or the advertised host when the
// listener binds every address; nothing when the leader has none.
func TestSSLListenerOfALeader(t *testing.T) {
	for _, tc := range []struct {
		listeners []string
		want      string
	}{
		{[]string{"tcp://10.0.0.1:9092", "ssl://10.0.0.1:9093"}, "10.0.0.1:9093"},
		{[]string{"ssl://0.0.0.0:9093"}, "mq1.example.com:9093"},
		{[]string{"ssl://[::]:9093"}, "mq1.example.com:9093"},
		{[]string{"ssl://:9093"}, "mq1.example.com:9093"},
		{[]string{"tcp://10.0.0.1:9092", "unix:///run/mq.sock"}, ""},
		{[]string{"ssl://bad", "ssl://h:0", "ssl://h2:9094"}, "h2:9094"},
	} {
		br := controller.Broker{ID: 1, Host: "mq1.example.com", Port: 9092, Listeners: tc.listeners}
		if got := SSLListener(br); got != tc.want {
			t.Errorf("listeners %v: %q, want %q", tc.listeners, got, tc.want)
		}
	}
}
