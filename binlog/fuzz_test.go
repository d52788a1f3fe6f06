package binlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
)

// fuzzConfigs are the outbox tables a fuzz input is read with: the outbox
// table of testdata/outbox and two of testdata/types (rows decoded into
// events, by the fast rows decoder), one without the needed columns, and
// one without column names.
var fuzzConfigs = []FileConfig{
	{Schema: "im", Table: "fx_outbox"},
	{Schema: "toddy_test", Table: "outbox"},
	{Schema: "noria", Table: "t1"},
	{Schema: "im", Table: "ty_dt6"}, // testdata/types: the fast rows decoder's column types
	{Schema: "im", Table: "ty_ts3"},
	{Schema: "im", Table: "fx_outbox", Columns: []string{"id", "event_type", "conversation_id", "message_id", "seq_no", "sender_id", "receiver_id", "payload", "status", "retry_count", "next_retry_at", "claimed_at", "created_at", "updated_at"}},
}

// fixChecksums in FuzzFileReader's second argument recomputes the CRC32 of
// every event of the mutated input, so that mutations reach go-mysql's
// decoders instead of failing the checksum check.
const fixChecksums = 0x80

// withChecksums returns a copy of a binlog file with the last 4 bytes of
// each complete event replaced by the CRC32 of the rest of it.
func withChecksums(b []byte) []byte {
	b = bytes.Clone(b)
	for off := 4; off+replication.EventHeaderSize <= len(b); {
		size := int(binary.LittleEndian.Uint32(b[off+9:]))
		if size < replication.EventHeaderSize+replication.BinlogChecksumLength || off+size > len(b) {
			break
		}
		ev := b[off : off+size]
		binary.LittleEndian.PutUint32(ev[size-4:], crc32.ChecksumIEEE(ev[:size-4]))
		off += size
	}
	return b
}

// FuzzFileReader reads arbitrary bytes as the last (so possibly truncated)
// binlog file: it must return within a bounded time with transactions, a
// truncation report or a *FileError inside the input, and never panic.
// Seeded with every fixture; `go test` runs the seeds only.
func FuzzFileReader(f *testing.F) {
	var seeds []string
	for _, dir := range []string{fixtureDir, "testdata/outbox", "testdata/types"} {
		m, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, m...)
	}
	n := 0
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\xfebin")) {
			continue // README.md, fx.sql
		}
		for i := range fuzzConfigs {
			f.Add(b, uint8(i))
			f.Add(b, uint8(i)|fixChecksums)
		}
		n++
	}
	if n < 40 { // 39 fixtures and the 2 outbox files
		f.Fatalf("only %d seed files found", n)
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		cfg := fuzzConfigs[int(which&^fixChecksums)%len(fuzzConfigs)]
		if which&fixChecksums != 0 {
			data = withChecksums(data)
		}
		const name = "fuzz-bin.000001"
		r, err := NewFileReader([]string{name}, cfg, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		type outcome struct {
			txns int
			err  error
		}
		done := make(chan outcome, 1)
		go func() {
			fr := r.newRun(context.Background())
			drained := make(chan int)
			go func() {
				n := 0
				for range r.out {
					n++
				}
				drained <- n
			}()
			_, err := fr.readFile(name, bytes.NewReader(data), int64(len(data)), true)
			close(r.out)
			done <- outcome{<-drained, err}
		}()
		var o outcome
		select {
		case o = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("reading %d bytes took more than 20s", len(data))
		}
		res := r.Result()
		if o.txns != res.Txns {
			t.Errorf("%d transactions received, result says %d", o.txns, res.Txns)
		}
		if o.err != nil {
			var fe *FileError
			if !errors.As(o.err, &fe) || fe.File != name || fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("error without file and offset inside the input: %v", o.err)
			}
			return
		}
		if res.StopFile != name || res.StopOffset > int64(len(data)) {
			t.Fatalf("stopped at %s:%d of %d bytes", res.StopFile, res.StopOffset, len(data))
		}
		if res.Truncated == nil && res.StopOffset != int64(len(data)) {
			t.Fatalf("stopped at %d of %d bytes without a truncation report", res.StopOffset, len(data))
		}
		if res.Truncated != nil && !errors.Is(res.Truncated, ErrTruncated) {
			t.Fatalf("truncation report %v", res.Truncated)
		}
	})
}
