package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
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
//
// A script whose archive holds a file .mqd-props (key=value lines) starts
// its mqd with those properties. [kcat] holds when kcat is installed.
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
			if cond == "kcat" {
				_, err := exec.LookPath("kcat")
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

type mqdKey struct{}

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
