package broker

import (
	"testing"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

func TestClientsOnAnSSLListenerAreGivenSSLEndpoints(t *testing.T) {
	both := controller.Broker{ID: 1, Host: "mq1.example", Port: 9092, Listeners: []string{"unix:///run/mq/mqd.sock", "tcp://0.0.0.0:9092", "ssl://0.0.0.0:9093", "sasl_plaintext://0.0.0.0:9094", "sasl_ssl://0.0.0.0:9095"}}
	local := controller.Broker{ID: 2, Host: "127.0.0.1", Port: 9092, Listeners: []string{"tcp://127.0.0.1:9092", "ssl://127.0.0.2:9093"}}
	plain := controller.Broker{ID: 3, Host: "mq3.example", Port: 9092, Listeners: []string{"tcp://0.0.0.0:9092"}}
	ssl := &server.ConnInfo{Listener: "ssl://0.0.0.0:9093"}
	tcp := &server.ConnInfo{Listener: "tcp://0.0.0.0:9092"}
	saslPlain := &server.ConnInfo{Listener: "sasl_plaintext://0.0.0.0:9094"}
	saslSSL := &server.ConnInfo{Listener: "sasl_ssl://0.0.0.0:9095"}
	for _, tc := range []struct {
		name string
		c    *server.ConnInfo
		br   controller.Broker
		host string
		port int32
	}{
		{"ssl client, any-address ssl listener: the advertised host", ssl, both, "mq1.example", 9093},
		{"ssl client, specific ssl listener: its host", ssl, local, "127.0.0.2", 9093},
		{"ssl client, broker without ssl listener: the advertised address", ssl, plain, "mq3.example", 9092},
		{"tcp client: the advertised address", tcp, both, "mq1.example", 9092},
		{"sasl_plaintext client: the sasl_plaintext listener", saslPlain, both, "mq1.example", 9094},
		{"sasl_ssl client: the sasl_ssl listener", saslSSL, both, "mq1.example", 9095},
		{"sasl_ssl client, broker without one: the advertised address", saslSSL, local, "127.0.0.1", 9092},
		{"no connection: the advertised address", nil, both, "mq1.example", 9092},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := forListener(tc.c, tc.br)
			if got.Host != tc.host || got.Port != tc.port || got.ID != tc.br.ID {
				t.Fatalf("forListener = %d %s:%d, want %d %s:%d", got.ID, got.Host, got.Port, tc.br.ID, tc.host, tc.port)
			}
		})
	}
}
