// Command cdc-outbox tails a MySQL/MariaDB binlog and publishes the outbox
// table's INSERTs to Kafka, checkpointing the binlog position in Redis.
//
// Usage: cdc-outbox run --config config.yaml [--start latest|earliest|file:pos|gtid:set]
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version, commit and date are set with -ldflags "-X main.version=..."
// (make build: from git describe --tags, the commit and its time).
var (
	version = "dev"
	commit  string
	date    string
)

func main() {
	os.Exit(execute(os.Args[1:]))
}

// exitError carries an exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func execute(args []string) int {
	root := &cobra.Command{
		Use:           "cdc-outbox",
		Short:         "Publish transactional-outbox rows from the MySQL/MariaDB binlog to Kafka",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       fmt.Sprintf("%s (commit %s, built %s)", version, cmp.Or(commit, "unknown"), cmp.Or(date, "unknown")),
	}
	root.AddCommand(runCommand())
	root.AddCommand(verifyCommand())
	root.AddCommand(auditCommand())
	root.AddCommand(deadLetterCommand())
	root.AddCommand(checkpointCommand())
	root.AddCommand(statusCommand())
	root.AddCommand(checkCommand())
	root.AddCommand(replayCommand())
	root.AddCommand(pruneCommand())
	root.AddCommand(configCommand())
	root.SetArgs(args)
	// Every command's context (cmd.Context()) ends on SIGINT or SIGTERM.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(os.Stderr, "cdc-outbox:", err)
		return 2
	}
	return 0
}
