package client

import (
	"testing"

	"github.com/mqproject/mq/lib/mqtest"
)

func TestIsTerminalIsTrueForAPseudoTerminal(t *testing.T) {
	ptmx, tty := mqtest.Terminal(t)
	if !IsTerminal(tty) {
		t.Error("the terminal side of a pseudo-terminal is not taken for a terminal")
	}
	if !IsTerminal(ptmx) {
		t.Error("the controlling side of a pseudo-terminal is not taken for a terminal")
	}
}
