package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestSendFileUsesSendfileOnSockets checks that TCP and Unix connections
// really take the sendfile path (no fallback) and that a region past the end
// of the file is reported instead of waited on.
func TestSendFileUsesSendfileOnSockets(t *testing.T) {
	content := bytes.Repeat([]byte("sendfile"), 1<<18) // 2 MiB: fills socket buffers
	f := writeTemp(t, content)
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = shortSocketPath(t)
				os.MkdirAll(addr[:len(addr)-len("/mqd.sock")], 0o750)
			}
			l, err := net.Listen(network, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			client, err := net.Dial(network, l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			srv, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(client)
				got <- b
			}()
			sent, err := sendFile(srv.(syscall.Conn), f, 5, int64(len(content))-5)
			if err != nil || sent != int64(len(content))-5 {
				t.Fatalf("sendFile: sent %d, err %v", sent, err)
			}
			if _, err := sendFile(srv.(syscall.Conn), f, int64(len(content))-3, 10); !errors.Is(err, errFileShort) {
				t.Fatalf("region past the end: %v, want errFileShort", err)
			}
			srv.Close()
			want := append(content[5:], content[len(content)-3:]...)
			if b := <-got; !bytes.Equal(b, want) {
				t.Fatalf("received %d bytes, want %d identical ones", len(b), len(want))
			}
		})
	}
}
