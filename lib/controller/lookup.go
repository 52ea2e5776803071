package controller

import (
	"net"
	"strconv"
	"strings"
)

// CurrentLeader is partition p's leader and leader epoch in the image,
// -1 and -1 when t is nil or has no partition p.
func (t *Topic) CurrentLeader(p int32) (leader, epoch int32) {
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return -1, -1
	}
	return t.Partitions[p].Leader, t.Partitions[p].LeaderEpoch
}

// Adding are the replicas a reassignment in progress adds and does not
// also remove, in AddingReplicas' order: nil when none.
func (p Partition) Adding() []int32 {
	return minus(p.AddingReplicas, p.RemovingReplicas)
}

// ForScheme is b as a client connected on a listener of scheme (ssl,
// sasl_plaintext, sasl_ssl…) should see it: b's first listener of that
// scheme with a valid port, its host when that is a specific one, else b's
// advertised host; b unchanged when it has no such listener.
func (b Broker) ForScheme(scheme string) Broker {
	for _, l := range b.Listeners {
		hostPort, ok := strings.CutPrefix(l, scheme+"://")
		if !ok {
			continue
		}
		host, portText, err := net.SplitHostPort(hostPort)
		if err != nil {
			continue
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil || port == 0 {
			continue
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = b.Host
		}
		b.Host, b.Port = host, int32(port)
		return b
	}
	return b
}
