package binlog

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseStart(t *testing.T) {
	cases := []struct {
		in   string
		want Start
		bad  bool
	}{
		{in: "", want: Start{Kind: StartUnset}},
		{in: "   ", want: Start{Kind: StartUnset}},
		{in: "latest", want: Start{Kind: StartLatest}},
		{in: " latest\n", want: Start{Kind: StartLatest}},
		{in: "earliest", want: Start{Kind: StartEarliest}},
		{in: "mariadb-bin.000003:4", want: Start{Kind: StartFilePos, File: "mariadb-bin.000003", Pos: 4}},
		{in: "binlog.000012:123456", want: Start{Kind: StartFilePos, File: "binlog.000012", Pos: 123456}},
		{in: "f:4294967295", want: Start{Kind: StartFilePos, File: "f", Pos: 4294967295}},
		{in: "dir:with:colon:77", want: Start{Kind: StartFilePos, File: "dir:with:colon", Pos: 77}},
		{in: "gtid:0-1-42", want: Start{Kind: StartGTID, GTIDSet: "0-1-42"}},
		{in: "gtid:0-1-42,1-2-7", want: Start{Kind: StartGTID, GTIDSet: "0-1-42,1-2-7"}},
		{in: "gtid:3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", want: Start{Kind: StartGTID, GTIDSet: "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"}},
		{in: "foo", bad: true},
		{in: "Latest", bad: true},
		{in: "f:3", bad: true},
		{in: "f:0", bad: true},
		{in: "f:abc", bad: true},
		{in: "f:", bad: true},
		{in: ":4", bad: true},
		{in: "f:-4", bad: true},
		{in: "f:4294967296", bad: true},
		{in: "gtid:", bad: true},
		{in: " gtid: ", bad: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseStart(c.in)
			if c.bad {
				if !errors.Is(err, ErrStart) {
					t.Fatalf("ParseStart(%q) = %+v, %v; want ErrStart", c.in, got, err)
				}
				if got != (Start{}) {
					t.Errorf("ParseStart(%q) returned %+v with the error, want zero Start", c.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStart(%q): %v", c.in, err)
			}
			if got != c.want {
				t.Errorf("ParseStart(%q) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func TestPositionString(t *testing.T) {
	p := Position{File: "mariadb-bin.000001", Pos: 731}
	if got := p.String(); got != "mariadb-bin.000001:731" {
		t.Errorf("String() = %q", got)
	}
	p.GTID = "0-1-5"
	if got := p.String(); got != "mariadb-bin.000001:731 gtid=0-1-5" {
		t.Errorf("String() = %q", got)
	}
	if got := p.FilePos(); got != "mariadb-bin.000001:731" {
		t.Errorf("FilePos() = %q", got)
	}
	if !(Position{}).IsZero() || (Position{GTIDSet: "0-1-5"}).IsZero() || p.IsZero() {
		t.Error("IsZero wrong")
	}
}

// validConfig is a complete, valid configuration.
func validConfig() Config {
	c := DefaultConfig()
	c.User = "cdc_outbox"
	c.Password = "s3cret"
	c.Schema = "im"
	c.Start = "latest"
	return c
}

func TestDefaultConfig(t *testing.T) {
	d := DefaultConfig()
	want := Config{Addr: "127.0.0.1:3306", ServerID: 5701, Table: "im_event_outbox", PositionMode: ModeFile,
		HeartbeatPeriod: 5 * time.Second, ReadTimeout: 30 * time.Second, Linger: 3 * time.Millisecond, ServerIDWait: 20 * time.Second, TxnBuffer: 256, BufferBytes: 16 << 20,
		BackfillWhere: DefaultBackfillWhere}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("DefaultConfig() = %+v, want %+v", d, want)
	}
	// The defaults lack what has no sensible default: user and schema.
	err := d.Validate()
	for _, f := range []string{"source.user: required", "source.schema: required"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("DefaultConfig().Validate() = %v, want it to contain %q", err, f)
		}
	}
	if n := len(strings.Split(err.Error(), "\n")); n != 2 {
		t.Errorf("DefaultConfig().Validate() has %d errors, want 2: %v", n, err)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want []string // each a line of the joined error, by prefix; none: valid
	}{
		{name: "valid", mod: func(*Config) {}},
		{name: "mysql flavor", mod: func(c *Config) { c.Flavor = FlavorMySQL }},
		{name: "mariadb flavor", mod: func(c *Config) { c.Flavor = FlavorMariaDB }},
		{name: "empty start (a checkpoint exists)", mod: func(c *Config) { c.Start = "" }},
		{name: "file:pos start", mod: func(c *Config) { c.Start = "mariadb-bin.000001:4" }},
		{name: "gtid start in gtid mode", mod: func(c *Config) { c.PositionMode = ModeGTID; c.Start = "gtid:0-1-42" }},
		{name: "IPv6 address", mod: func(c *Config) { c.Addr = "[::1]:3306" }},
		{name: "heartbeat at the 100ms minimum", mod: func(c *Config) { c.HeartbeatPeriod = 100 * time.Millisecond; c.ReadTimeout = time.Second }},
		{name: "bad flavor", mod: func(c *Config) { c.Flavor = "postgres" }, want: []string{`source.flavor: "postgres"`}},
		{name: "addr without port", mod: func(c *Config) { c.Addr = "db" }, want: []string{`source.addr: "db": want host:port`}},
		{name: "addr without host", mod: func(c *Config) { c.Addr = ":3306" }, want: []string{`source.addr: ":3306": want host:port`}},
		{name: "addr with bad port", mod: func(c *Config) { c.Addr = "db:99999" }, want: []string{`source.addr: "db:99999": bad port`}},
		{name: "addr with named port", mod: func(c *Config) { c.Addr = "db:mysql" }, want: []string{`source.addr: "db:mysql": bad port`}},
		{name: "no user", mod: func(c *Config) { c.User = "" }, want: []string{"source.user: required"}},
		{name: "no server id", mod: func(c *Config) { c.ServerID = 0 }, want: []string{"source.server-id: required"}},
		{name: "no schema", mod: func(c *Config) { c.Schema = "" }, want: []string{"source.schema: required"}},
		{name: "no table", mod: func(c *Config) { c.Table = "" }, want: []string{"source.table: required"}},
		{name: "empty position mode", mod: func(c *Config) { c.PositionMode = "" }, want: []string{`source.position-mode: "": want file or gtid`}},
		{name: "bad position mode", mod: func(c *Config) { c.PositionMode = "GTID" }, want: []string{`source.position-mode: "GTID"`}},
		{name: "bad start", mod: func(c *Config) { c.Start = "foo" }, want: []string{`source.start: binlog: start position: "foo"`}},
		{name: "gtid start in file mode", mod: func(c *Config) { c.Start = "gtid:0-1-42" }, want: []string{"source.start: a GTID start needs position-mode: gtid"}},
		{name: "heartbeat too short", mod: func(c *Config) { c.HeartbeatPeriod = 50 * time.Millisecond }, want: []string{"source.heartbeat-period: 50ms: want at least 100ms"}},
		{name: "read timeout equal to heartbeat", mod: func(c *Config) { c.ReadTimeout = c.HeartbeatPeriod }, want: []string{"source.read-timeout: 5s: must exceed heartbeat-period (5s)"}},
		{name: "read timeout below heartbeat", mod: func(c *Config) { c.HeartbeatPeriod = time.Minute }, want: []string{"source.read-timeout: 30s: must exceed heartbeat-period (1m0s)"}},
		{name: "txn buffer zero", mod: func(c *Config) { c.TxnBuffer = 0 }, want: []string{"source.txn-buffer: 0: want at least 1"}},
		{
			name: "several problems are all reported, in field order",
			mod: func(c *Config) {
				c.Addr, c.User, c.Schema, c.Start, c.TxnBuffer = "nope", "", "", "f:3", -1
			},
			want: []string{"source.addr:", "source.user:", "source.schema:", "source.start:", "source.txn-buffer:"},
		},
		{
			name: "zero config",
			mod:  func(c *Config) { *c = Config{} },
			want: []string{"source.addr:", "source.user:", "source.server-id:", "source.schema:", "source.table:",
				"source.position-mode:", "source.heartbeat-period:", "source.read-timeout:", "source.buffer-bytes:", "source.txn-buffer:"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := validConfig()
			c.mod(&cfg)
			err := cfg.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %v", c.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(c.want) {
				t.Fatalf("Validate() gave %d errors, want %d:\n%v", len(lines), len(c.want), err)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d = %q, want prefix %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	c := validConfig()
	r := c.Redacted()
	if r.Password != "***" {
		t.Errorf("Redacted().Password = %q, want ***", r.Password)
	}
	if c.Password != "s3cret" {
		t.Errorf("Redacted modified the receiver: Password = %q", c.Password)
	}
	r.Password = c.Password
	if !reflect.DeepEqual(r, c) {
		t.Errorf("Redacted changed other fields: %+v vs %+v", r, c)
	}
	c.Password = ""
	if got := c.Redacted().Password; got != "" {
		t.Errorf("Redacted() of an empty password = %q, want empty", got)
	}
}
