// Command printversion prints version.String(), for TestStampSetsString.
package main

import (
	"fmt"

	"github.com/mqproject/mq/lib/version"
)

func main() { fmt.Println(version.String()) }
