package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/client"
)

// The shell completion offers cluster health and its --max-lag.
func TestCompletionOffersClusterHealth(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"cluster", ""}, "health"},
		{[]string{"cluster", "health", "--"}, "--max-lag"},
	} {
		app := newApp()
		var out bytes.Buffer
		app.Writer = &out
		args := append(append([]string{"mqctl"}, tc.words...), "--generate-bash-completion")
		if code := client.Run(app, args); code != 0 {
			t.Fatalf("%v: exit %d", tc.words, code)
		}
		if !strings.Contains("\n"+out.String(), "\n"+tc.want+"\n") {
			t.Errorf("completing %q: %q, want %s among them", tc.words, out.String(), tc.want)
		}
	}
}
