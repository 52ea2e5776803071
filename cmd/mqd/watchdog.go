package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/node"
)

// This file keeps systemd's watchdog (WatchdogSec=) fed. A keep-alive is
// only as honest as what it proves, so mqd does not send WATCHDOG=1 from
// a bare ticker, which would keep ticking while every other goroutine is
// wedged: each keep-alive follows a request mqd made to itself through
// its own listener, on a new connection — the accept loop took it, the
// request went through the server's read loop and the broker's handler
// (Metadata, which reads the broker's metadata image) and an answer came
// back. One small connection per half interval costs nothing.
//
// A controller without quorum does not stop the keep-alives: the process
// is healthy, and restarting it would not bring the quorum back (mqctl
// cluster health reports that).

// watchdogInterval is the keep-alive deadline systemd set for this
// process, read as sd_watchdog_enabled(3) does: $WATCHDOG_USEC in
// microseconds, for this process only when $WATCHDOG_PID is unset or is
// pid. ok is false when there is no watchdog (or it is another process's);
// err says why a value is unusable.
func watchdogInterval(getenv func(string) string, pid int) (every time.Duration, ok bool, err error) {
	usec := getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0, false, nil
	}
	if p := getenv("WATCHDOG_PID"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return 0, false, fmt.Errorf("$WATCHDOG_PID %q is not a pid", p)
		}
		if n != pid {
			return 0, false, nil
		}
	}
	n, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || n == 0 || n > math.MaxInt64/uint64(time.Microsecond) {
		return 0, false, fmt.Errorf("$WATCHDOG_USEC %q is not a positive number of microseconds", usec)
	}
	return time.Duration(n) * time.Microsecond, true, nil
}

// startWatchdog starts the keep-alives when systemd asked for them
// ($WATCHDOG_USEC) and returns what stops them (before STOPPING=1: a
// draining daemon no longer answers itself, and the stop has its own
// timeout).
func startWatchdog(d *node.Daemon, logger *slog.Logger) (stop func()) {
	every, ok, err := watchdogInterval(os.Getenv, os.Getpid())
	if err != nil {
		logger.Warn("ignoring the systemd watchdog", "err", err)
	}
	if !ok {
		return func() {}
	}
	addr, err := probeAddr(d.Addrs())
	if err != nil {
		logger.Warn("ignoring the systemd watchdog: nothing to ask", "err", err)
		return func() {}
	}
	logger.Info("watchdog keep-alives", "interval", every.String(), "probe", addr.String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runWatchdog(ctx, every, func(ctx context.Context) error { return probeBroker(ctx, addr) }, notify, logger)
	}()
	return func() {
		cancel()
		<-done
	}
}

// runWatchdog sends WATCHDOG=1 through send every half of every, each
// time after probe succeeded within that half, until ctx ends. A failed
// probe withholds the keep-alive and is logged (once until one succeeds
// again): when they keep failing, systemd stops mqd and, with
// Restart=on-failure, starts it again.
func runWatchdog(ctx context.Context, every time.Duration, probe func(context.Context) error, send func(string) error, logger *slog.Logger) {
	half := every / 2
	t := time.NewTicker(half)
	defer t.Stop()
	failing := false
	for {
		pctx, cancel := context.WithTimeout(ctx, half)
		err := probe(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			logger.Warn("watchdog: mqd does not answer its own request; withholding the keep-alive", "err", err)
			failing = true
		case err == nil:
			if failing {
				logger.Info("watchdog: mqd answers again; keep-alives resume")
				failing = false
			}
			if err := send("WATCHDOG=1"); err != nil {
				logger.Warn("cannot notify systemd", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probeAddr picks the listener the watchdog asks: the first Unix socket,
// else the first plaintext TCP listener, an unspecified host (0.0.0.0,
// [::]) asked on the loopback; never an ssl:// listener, whose client
// certificates it may not have. addrs are the daemon's, as Daemon.Addrs
// gives them.
func probeAddr(addrs []string) (client.Addr, error) {
	var tcp []client.Addr
	for _, s := range addrs {
		parsed, err := client.ParseAddrs(s)
		if err != nil {
			return client.Addr{}, err
		}
		a := parsed[0]
		if a.Network == client.NetworkUnix {
			return a, nil
		}
		if a.TLS == nil {
			tcp = append(tcp, a)
		}
	}
	if len(tcp) == 0 {
		return client.Addr{}, errors.New("no listener")
	}
	a := tcp[0]
	host, port, err := net.SplitHostPort(a.Address)
	if err != nil {
		return client.Addr{}, err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		loopback := "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			loopback = "::1"
		}
		a.Address = net.JoinHostPort(loopback, port)
	}
	return a, nil
}

// probeVersion is the Metadata version the probe sends: the newest whose
// headers are not flexible, so the framing stays three fields.
const probeVersion = 8

// maxProbeResponse bounds the answer the probe reads (a Metadata answer
// for no topics: the brokers and the cluster id).
const maxProbeResponse = 1 << 20

// probeBroker asks the broker at a for Metadata about no topics on a new
// connection and checks that a well-formed answer comes back before ctx
// ends.
func probeBroker(ctx context.Context, a client.Addr) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, a.Network, a.Address)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	req := kmsg.NewPtrMetadataRequest()
	req.Version = probeVersion
	req.Topics = []kmsg.MetadataRequestTopic{} // none; nil would be all
	const correlationID = 1
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("mqd-watchdog")).AppendRequest(nil, req, correlationID)
	if _, err := conn.Write(frame); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxProbeResponse {
		return fmt.Errorf("answer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != correlationID {
		return fmt.Errorf("answer for request %d, want %d", got, correlationID)
	}
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Version = probeVersion
	if err := resp.ReadFrom(body[4:]); err != nil {
		return fmt.Errorf("metadata answer: %w", err)
	}
	return nil
}
