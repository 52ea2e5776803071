//go:build !linux

package server

import "net"

func holdLate(net.Conn) lateRef { return -1 }

func closeLate(lateRef) {}
