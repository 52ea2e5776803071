//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package client

import "golang.org/x/sys/unix"

const ioctlGetTermios = unix.TIOCGETA
