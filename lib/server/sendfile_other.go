//go:build !linux

package server

import (
	"errors"
	"os"
	"syscall"
)

var errSendfileUnsupported = errors.New("sendfile unsupported")

// sendFile is only implemented on Linux; elsewhere the caller copies.
func sendFile(syscall.Conn, *os.File, int64, int64) (int64, error) {
	return 0, errSendfileUnsupported
}
