package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
)

func TestStatusRetention(t *testing.T) {
	files := []binlog.LogFile{{Name: "mariadb-bin.000004", Size: 1000}, {Name: "mariadb-bin.000005", Size: 2000}}
	ret := binlog.Retention{ExpireSeconds: 604800, ExpireDays: 7}
	for _, c := range []struct {
		cp      *checkpoint.Checkpoint
		want    string
		warning bool
	}{
		{&checkpoint.Checkpoint{File: "mariadb-bin.000005", Pos: 500}, "1500 bytes, 1 files before", false},
		{&checkpoint.Checkpoint{File: "mariadb-bin.000004", Pos: 300}, "300 bytes, 0 files before", true},
		{&checkpoint.Checkpoint{GTIDSet: "0-1-5"}, "headroom   (unknown)", false},
		{nil, "headroom   (unknown)", false},
	} {
		st := status{Key: "k", Checkpoint: c.cp}
		st.computeRetention(files, ret)
		var b bytes.Buffer
		st.writeRetention(&b)
		out := b.String()
		if !strings.Contains(out, c.want) || !strings.Contains(out, "oldest binlog mariadb-bin.000004 (2 files") ||
			!strings.Contains(out, "binlog_expire_logs_seconds 604800, expire_logs_days 7") || strings.Contains(out, "WARNING") != c.warning {
			t.Errorf("checkpoint %+v:\n%s", c.cp, out)
		}
	}
	st := status{}
	st.computeRetention(files, binlog.Retention{ExpireSeconds: -1, ExpireDays: -1})
	if st.Retention.ExpireSeconds != nil || st.Retention.ExpireDays != nil {
		t.Error("missing variables reported")
	}
}
