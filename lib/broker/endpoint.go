package broker

import (
	"strings"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// forListener is br as a client connected on c's listener should see it,
// as Kafka answers with the endpoint of the listener a request came on:
// a client on an ssl://, sasl_plaintext:// or sasl_ssl:// listener is
// given br's listener of the same scheme (controller.Broker.ForScheme),
// so that it reaches every broker with the same TLS and authentication;
// any other client, or one whose broker has no listener of that scheme,
// gets br's advertised address.
func forListener(c *server.ConnInfo, br controller.Broker) controller.Broker {
	if c == nil {
		return br
	}
	scheme, _, _ := strings.Cut(c.Listener, "://")
	if scheme != "ssl" && scheme != "sasl_plaintext" && scheme != "sasl_ssl" {
		return br
	}
	return br.ForScheme(scheme)
}
