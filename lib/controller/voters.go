package controller

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// DefaultRaftPort is the port of a voter address given without one (the
// port of Kafka's controller listener in its examples).
const DefaultRaftPort = 9093

// Voter is one member of the Raft voter set: a node ID and the address of
// its Raft transport.
type Voter struct {
	ID   int32
	Addr string
}

// String formats v as ID@host:port, the form ParseVoters reads.
func (v Voter) String() string { return fmt.Sprintf("%d@%s", v.ID, v.Addr) }

// ParseVoters parses a voter list in the syntax of Kafka's
// controller.quorum.voters: comma-separated ID@host:port entries, e.g.
// "1@h1:9093,2@h2:9093,3@[::1]:9093". A missing port means
// DefaultRaftPort. IDs and addresses must be unique. The empty string
// parses to an empty list (a single-voter cluster of this node).
func ParseVoters(s string) ([]Voter, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var voters []Voter
	seenID := map[int32]bool{}
	seenAddr := map[string]bool{}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		v, err := parseVoter(entry)
		if err != nil {
			return nil, fmt.Errorf("controller: voter %q: %w", entry, err)
		}
		if seenID[v.ID] {
			return nil, fmt.Errorf("controller: voter %q: id %d listed twice", entry, v.ID)
		}
		if seenAddr[v.Addr] {
			return nil, fmt.Errorf("controller: voter %q: address %s listed twice", entry, v.Addr)
		}
		seenID[v.ID], seenAddr[v.Addr] = true, true
		voters = append(voters, v)
	}
	return voters, nil
}

func parseVoter(entry string) (Voter, error) {
	idText, addr, ok := strings.Cut(entry, "@")
	if !ok {
		return Voter{}, fmt.Errorf("want ID@host:port")
	}
	id, err := strconv.ParseInt(idText, 10, 32)
	if err != nil || id < 0 || idText != strconv.FormatInt(id, 10) {
		return Voter{}, fmt.Errorf("node id %q is not a non-negative integer", idText)
	}
	host, port, err := splitHostPort(addr)
	if err != nil {
		return Voter{}, err
	}
	if host == "" || strings.ContainsAny(host, " @,/[]") {
		return Voter{}, fmt.Errorf("bad host %q", host)
	}
	return Voter{ID: int32(id), Addr: net.JoinHostPort(host, strconv.Itoa(port))}, nil
}

// splitHostPort splits host[:port] and [ipv6][:port], defaulting the port.
func splitHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		// No port: a plain host name or IPv4 address, or a bracketed IPv6.
		if strings.HasPrefix(addr, "[") && strings.HasSuffix(addr, "]") {
			return addr[1 : len(addr)-1], DefaultRaftPort, nil
		}
		if strings.Contains(addr, ":") {
			return "", 0, fmt.Errorf("bad address %q", addr)
		}
		return addr, DefaultRaftPort, nil
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", portText)
	}
	return host, port, nil
}
