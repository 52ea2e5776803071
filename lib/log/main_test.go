package log

import (
	"flag"
	"os"
	"sync"
	"testing"
)

var maxOpenFlag = flag.Int("files.max", 0, "bound of the Files shared by the tests' logs (0: DefaultMaxOpenFiles); 2 runs every test with descriptors closed and opened again all the time")

func TestMain(m *testing.M) {
	flag.Parse()
	if *maxOpenFlag > 0 {
		shared := NewFiles(*maxOpenFlag)
		defaultFiles = sync.OnceValue(func() *Files { return shared })
	}
	os.Exit(m.Run())
}
