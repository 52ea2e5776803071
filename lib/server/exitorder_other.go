//go:build !linux

package server

import "syscall"

func lateBase() int { return 0 }

func holdLate(syscall.Conn) lateRef { return noLate }

func closeLate(lateRef) {}
