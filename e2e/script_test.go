package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestScripts runs testdata/scripts/*.txtar: command-line scenarios for our
// tools, each against its own fresh mqd. The programs of cmd/ are on PATH.
// Each script sees:
//
//	$MQ_BROKER   tcp://HOST:PORT of its mqd (so the tools find it)
//	$MQD_ADDR    HOST:PORT of its mqd (for kcat)
//	$MQD_SOCKET  the path of its mqd's Unix socket
//
// and these commands besides testscript's own:
//
//	mqd-stop     stop mqd with SIGTERM (to test "broker down")
//	mqd-start    start it again on the same data directory
//	mqd-kill     SIGKILL it
//	mqd-log FILE write what mqd has logged so far to FILE

// A script whose archive holds a file .mqd-props (key=value lines) starts
// its mqd with those properties. [kcat] holds when kcat is installed.
// [share-groups] holds when mqd answers the share group APIs (KIP-932:
// ShareGroupHeartbeat, ShareFetch and ShareAcknowledge in ApiVersions,
// asked of an mqd of its own once); scripts of share group features
// begin with [!share-groups] skip, and so run once the broker has them.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("..", "testdata", "scripts"),
		Setup: func(env *testscript.Env) error {
			props, err := scriptProps(filepath.Join(env.WorkDir, ".mqd-props"))
			if err != nil {
				return err
			}
			p, err := launchMQD(filepath.Join(env.WorkDir, ".mqd-data"), props)
			if err != nil {
				return err
			}
			env.Defer(func() {
				p.kill()
				os.RemoveAll(p.sockDir)
				if err := p.checkPeak(); err != nil {
					env.T().Fatal(err)
				}
			})
			env.Values[mqdKey{}] = p
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			env.Setenv("MQ_BROKER", "tcp://"+p.addr)
			env.Setenv("MQD_ADDR", p.addr)
			env.Setenv("MQD_SOCKET", p.socket)
			env.Setenv("MQD_PID", strconv.Itoa(p.pid()))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"mqd-stop": func(ts *testscript.TestScript, neg bool, args []string) {
				ts.Check(scriptMQD(ts).stop())
			},
			"mqd-start": func(ts *testscript.TestScript, neg bool, args []string) {
				p := scriptMQD(ts)
				ts.Check(p.start())
				ts.Setenv("MQ_BROKER", "tcp://"+p.addr)
				ts.Setenv("MQD_ADDR", p.addr)
				ts.Setenv("MQD_PID", strconv.Itoa(p.pid()))
			},
			"mqd-kill": func(ts *testscript.TestScript, neg bool, args []string) {
				scriptMQD(ts).kill()
			},
			"mqd-log": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: mqd-log FILE")
				}
				ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(scriptMQD(ts).stderr.String()), 0o644))
			},
		},
		Condition: func(cond string) (bool, error) {
			if cond == "share-groups" {
				return shareGroupsAnswered()
			}
			if cond == "kcat" {
				_, err := exec.LookPath("kcat")
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

type mqdKey struct{}

var shareGroups struct {
	once sync.Once
	ok   bool
	err  error
}

// shareGroupsAnswered reports whether mqd answers the share group APIs,
// asking an mqd started for the question, once per test process.
func shareGroupsAnswered() (bool, error) {
	shareGroups.once.Do(func() {
		dir, err := os.MkdirTemp("", "mq-share-probe-")
		if err != nil {
			shareGroups.err = err
			return
		}
		defer os.RemoveAll(dir)
		p, err := launchMQD(filepath.Join(dir, "data"), nil)
		if err != nil {
			shareGroups.err = err
			return
		}
		defer func() {
			p.kill()
			os.RemoveAll(p.sockDir)
		}()
		shareGroups.ok, shareGroups.err = answersShareGroups(p.addr)
	})
	return shareGroups.ok, shareGroups.err
}

// answersShareGroups reports whether the broker at addr advertises the
// share group APIs.
func answersShareGroups(addr string) (bool, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return false, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	need := map[int16]bool{int16(kmsg.ShareGroupHeartbeat): true, int16(kmsg.ShareFetch): true, int16(kmsg.ShareAcknowledge): true}
	for _, k := range resp.ApiKeys {
		delete(need, k.ApiKey)
	}
	return len(need) == 0, nil
}

func scriptMQD(ts *testscript.TestScript) *mqdProc {
	return ts.Value(mqdKey{}).(*mqdProc)
}

// scriptProps reads the properties a script asks its mqd to start with:
// the file .mqd-props in the script's archive, one key=value per line.
func scriptProps(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lines(bytes.NewReader(data)), nil
}
