// Command gencerts writes the test certificates of package testcerts into
// the directory given as its first argument (scripts/dev-stack.sh
// up-secure); further arguments are extra host names of the server
// certificates (docker-compose.secure.yml: kafka, mysql, redis).
package main

import (
	"fmt"
	"os"

	"github.com/cdc-outbox/cdc-outbox/internal/testcerts"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gencerts DIR [HOST...]")
		os.Exit(2)
	}
	if err := testcerts.Generate(os.Args[1], os.Args[2:]...); err != nil {
		fmt.Fprintln(os.Stderr, "gencerts:", err)
		os.Exit(1)
	}
}
