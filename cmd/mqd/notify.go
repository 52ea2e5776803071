package main

import (
	"net"
	"os"
)

// notify sends state (READY=1, STOPPING=1) to the service manager at
// $NOTIFY_SOCKET, as sd_notify(3) does: one datagram on a unixgram socket.
// An address starting with '@' is a Linux abstract socket; Go's net
// package maps the '@' to the leading NUL byte. Without $NOTIFY_SOCKET it
// does nothing.
func notify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}
