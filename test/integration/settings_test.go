//go:build integration

package integration

import (
	"fmt"
	"testing"
	"time"
)

// A session writing the outbox with binlog_format=STATEMENT or
// binlog_row_image=MINIMAL (global settings can change under a running
// publisher; new sessions pick them up) stops the publisher with an error
// naming the fix; nothing is skipped silently.
func TestRuntimeSettingChangeStopsPublisher(t *testing.T) {
	for _, c := range []struct{ name, set, want string }{
		{"statement", "SET SESSION binlog_format='STATEMENT'", "binlog_format=ROW"},
		{"minimal_image", "SET SESSION binlog_row_image='MINIMAL'", "binlog_row_image=FULL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			p := e.start()
			conn := e.sql()
			defer conn.Close()
			if _, err := conn.Execute(c.set); err != nil {
				t.Fatal(err)
			}
			q := fmt.Sprintf("INSERT INTO `%s` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created', 1, 1, 1, 1, 2, '{}')", e.outbox)
			if _, err := conn.Execute(q); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-p.done:
				p.done <- err
			case <-time.After(time.Minute):
				t.Fatal("the publisher kept running")
			}
			if code := p.cmd.ProcessState.ExitCode(); code != 1 {
				t.Fatalf("exit code %d, want 1", code)
			}
			if !logHas(p.log, c.want) {
				t.Fatalf("error does not name %s; log %s", c.want, p.log)
			}
		})
	}
}
