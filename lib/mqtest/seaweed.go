package mqtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/loopback"
)

// seaweedBucket is the bucket StartSeaweed makes.
const seaweedBucket = "mq-tier"

// Seaweed is a SeaweedFS server (`weed server`: master, volume server,
// filer and S3 gateway in one process) on loopback ports of its own, with
// one bucket and one identity whose keys the clients take from the
// environment (Env, Setenv).
type Seaweed struct {
	Endpoint  string // the S3 gateway: http://127.0.0.1:PORT
	Bucket    string // made by StartSeaweed
	AccessKey string // the identity's keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)
	SecretKey string

	tb    testing.TB
	bin   string
	dir   string // data, config, sockets and the log
	args  []string
	filer string // the filer's HTTP address: http://127.0.0.1:PORT

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed when cmd ended
}

// WeedBinary returns the path of SeaweedFS's weed binary: $MQ_WEED, else
// the path a build under way writes to the file $MQ_WEED_WAIT once it
// ends (.ci/run starts .ci/seaweedfs in the background, beside the
// tests: this waits for it, up to weedBuildWait), else weed on $PATH; ""
// when there is none. `.ci/seaweedfs` builds it.
func WeedBinary() string {
	if p := os.Getenv("MQ_WEED"); p != "" {
		return p
	}
	if status := os.Getenv("MQ_WEED_WAIT"); status != "" {
		return awaitWeedBuild(status)
	}
	p, _ := exec.LookPath("weed")
	return p
}

// weedBuildWait bounds how long WeedBinary waits for a build under way:
// longer than a build takes on two busy cores.
const weedBuildWait = 20 * time.Minute

// awaitWeedBuild waits for the file status, which a build writes once it
// ends: the binary's path, or nothing when it failed.
func awaitWeedBuild(status string) string {
	weedBuild.Do(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		deadline := time.Now().Add(weedBuildWait)
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(status); err == nil {
				weedBuilt = strings.TrimSpace(string(b))
				return
			}
			<-tick.C
		}
	})
	return weedBuilt
}

var (
	weedBuild sync.Once
	weedBuilt string // awaitWeedBuild's answer
)

// InCI reports whether the tests run in CI (.ci/run: CI is set), where a
// tool the tests need is a failure when absent, not a skip.
func InCI() bool { return os.Getenv("CI") != "" }

// StartSeaweed starts a SeaweedFS server for tb on a temporary directory,
// waits until its S3 gateway takes writes, makes the bucket, and stops it
// and removes the directory when tb ends. Without a weed binary
// (WeedBinary) it skips tb, or fails it in CI.
func StartSeaweed(tb testing.TB) *Seaweed {
	tb.Helper()
	bin := WeedBinary()
	if bin == "" {
		if InCI() {
			tb.Fatal("SeaweedFS's weed is missing: .ci/run builds it with .ci/seaweedfs (MQ_WEED_WAIT: its build failed or took too long)")
		}
		tb.Skip("SeaweedFS's weed is missing: build it with .ci/seaweedfs and set MQ_WEED to the path it prints")
	}
	// Not tb.TempDir: the Unix sockets of the filer and the gateway live
	// here, and a socket's path must stay short.
	dir, err := os.MkdirTemp("", "mq-weed-")
	if err != nil {
		tb.Fatal(err)
	}
	ports := make([]int, 8)
	for i := range ports {
		if ports[i], err = loopback.FreePort(); err != nil {
			tb.Fatal(err)
		}
	}
	s := &Seaweed{
		Endpoint:  fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		Bucket:    seaweedBucket,
		AccessKey: seaweedAccessKey,
		SecretKey: seaweedSecretKey(),
		tb:        tb,
		bin:       bin,
		dir:       dir,
		filer:     fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
	}
	// The identity: all actions, Admin included, on every bucket.
	identities, _ := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "mq",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), identities, 0o600); err != nil {
		tb.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		tb.Fatal(err)
	}
	s.args = []string{"server",
		"-dir=" + data,
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-s3", fmt.Sprintf("-s3.port=%d", ports[0]), fmt.Sprintf("-s3.port.grpc=%d", ports[1]),
		"-s3.config=" + filepath.Join(dir, "s3.json"),
		"-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		fmt.Sprintf("-filer.port=%d", ports[2]), fmt.Sprintf("-filer.port.grpc=%d", ports[3]),
		"-filer.localSocket=" + filepath.Join(dir, "filer.sock"),
		fmt.Sprintf("-master.port=%d", ports[4]), fmt.Sprintf("-master.port.grpc=%d", ports[5]),
		fmt.Sprintf("-volume.port=%d", ports[6]), fmt.Sprintf("-volume.port.grpc=%d", ports[7]),
		// Nothing leaves the machine.
		"-master.telemetry=false",
		// A master restarted on its state waits for an election before it
		// serves (10 s by default); it is the only one.
		"-master.electionTimeout=1s",
	}
	tb.Cleanup(func() {
		s.Stop()
		// weed serves gRPC on Unix sockets too, named for the ports, in /tmp.
		for _, p := range []int{ports[1], ports[3], ports[5], ports[7]} {
			for _, role := range []string{"s3", "filer", "master", "volume"} {
				os.Remove(fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", role, p))
			}
		}
		if tb.Failed() {
			tb.Logf("weed's log (%s):\n%s", s.logPath(), s.logTail())
		}
		os.RemoveAll(dir)
	})
	began := time.Now()
	s.Start()
	s.makeBucket()
	tb.Logf("SeaweedFS at %s, bucket %s, ready in %v", s.Endpoint, s.Bucket, time.Since(began).Round(time.Millisecond))
	return s
}

// URL is the bucket's URL for gocloud.dev/blob (s3blob): path-style
// requests to the gateway's endpoint. SeaweedFS sends no checksum with a
// ranged GET (S3 sends none either: a checksum is of a whole object), so
// the SDK validates checksums only where the API requires them, instead
// of logging each GET it could not validate.
func (s *Seaweed) URL() string {
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", "us-east-1")
	q.Set("use_path_style", "true")
	q.Set("response_checksum_validation", "when_required")
	return "s3://" + s.Bucket + "?" + q.Encode()
}

// The identity of every server a test process starts: one per process,
// so that the process can put its keys in its environment once
// (SetSeaweedEnv) and run tests with stores of their own side by side.
const seaweedAccessKey = "mqtest"

var seaweedSecretKey = sync.OnceValue(func() string {
	var key [16]byte
	rand.Read(key[:])
	return hex.EncodeToString(key[:])
})

// SeaweedEnv is the environment that gives a client (an mqd, a test's own
// bucket) the keys of the servers this process starts. It also keeps the
// AWS SDK from asking the EC2 metadata service for credentials or a
// region.
func SeaweedEnv() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + seaweedAccessKey,
		"AWS_SECRET_ACCESS_KEY=" + seaweedSecretKey(),
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetSeaweedEnv sets SeaweedEnv in this process's environment for good,
// where the programs it starts inherit it: for a TestMain whose parallel
// tests start servers (a parallel test cannot call Setenv).
func SetSeaweedEnv() error {
	for _, kv := range SeaweedEnv() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Env is SeaweedEnv: the keys of s, which are every server's of this
// process.
func (s *Seaweed) Env() []string { return SeaweedEnv() }

// Setenv sets Env in the test's own process, for the length of tb.
func (s *Seaweed) Setenv(tb testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		tb.Setenv(k, v)
	}
}

// Start starts the server (again, after Stop: same directory, same ports)
// and waits until the gateway takes writes.
func (s *Seaweed) Start() {
	s.tb.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		s.tb.Fatal("seaweed: Start while running")
	}
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.mu.Unlock()
		s.tb.Fatal(err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir // weed reads its *.toml from the working directory first
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.mu.Unlock()
		s.tb.Fatalf("start %s: %v", s.bin, err)
	}
	logf.Close()
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	// The gateway answers (anything: a refusal of an unsigned request is
	// an answer) once it listens; writes work once the volume server has
	// registered with the master and the filer reaches both.
	Wait{Timeout: 90 * time.Second}.For(s.tb, "SeaweedFS's S3 gateway at "+s.Endpoint, func() (bool, string) {
		select {
		case <-exited:
			s.tb.Fatalf("weed exited: %v\n%s", cmd.ProcessState, s.logTail())
		default:
		}
		resp, err := http.Get(s.Endpoint + "/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
}

// Stop kills the server and waits for it to exit: the store is down
// until Start. SIGKILL, not SIGTERM: weed takes 10 s to stop gracefully,
// and what it acknowledged is in its files already (a killed process
// loses no write the kernel has).
func (s *Seaweed) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// makeBucket makes the bucket: a directory under the filer's /buckets,
// which is what a bucket is to SeaweedFS. Then it writes and deletes an
// object through the filer until a write succeeds: the first writes fail
// while the master has no writable volume yet.
func (s *Seaweed) makeBucket() {
	s.tb.Helper()
	do := func(method, path, contentType string, body []byte, ok ...int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, s.filer+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode/100 != 2 && !slices.Contains(ok, resp.StatusCode) {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(msg))
		}
		return nil
	}
	dirPath := "/buckets/" + s.Bucket + "/"
	Wait{Timeout: 90 * time.Second}.For(s.tb, "the bucket and a first write", func() (bool, string) {
		// 409 Conflict: made by an earlier round.
		if err := do(http.MethodPost, dirPath, "", nil, http.StatusConflict); err != nil {
			return false, err.Error()
		}
		if err := do(http.MethodPut, dirPath+".mq-ready", "application/octet-stream", []byte("ready")); err != nil {
			return false, err.Error()
		}
		if err := do(http.MethodDelete, dirPath+".mq-ready", "", nil); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

func (s *Seaweed) logPath() string { return filepath.Join(s.dir, "weed.log") }

// logTail is the end of weed's log, for a failure's message.
func (s *Seaweed) logTail() string {
	b, err := os.ReadFile(s.logPath())
	if err != nil {
		return err.Error()
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}
