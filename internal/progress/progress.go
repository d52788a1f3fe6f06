package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Config describes one operation's progress.
type Config struct {
	// Out receives the bar or the lines (usually os.Stderr).
	Out io.Writer
	// Desc names the operation, e.g. "replay"; it starts each line.
	Desc string
	// Total is the position's end (bytes of a binlog range, rows to
	// delete); 0 or less: unknown (a spinner, no percentage, no ETA).
	Total int64
	// Bytes says the position counts bytes (shown as kB/MB on the bar and
	// "of N bytes" in lines).
	Bytes bool
	// Unit is what the count counts, e.g. "events" or "rows".
	Unit string
	// Interval between two plain lines; 0 means 5 s.
	Interval time.Duration
	// Terminal, when set, decides bar (true) or lines (false) instead of
	// term.IsTerminal on Out.
	Terminal *bool
}

// Reporter shows one operation's progress. Update is safe for concurrent
// use; Run and Finish are called once each by the owner.
type Reporter struct {
	cfg      Config
	bar      *progressbar.ProgressBar
	pos      atomic.Int64
	count    atomic.Int64
	total    atomic.Int64 // SetTotal; cfg.Total at first
	at       atomic.Pointer[string]
	began    time.Time
	finished chan struct{}
	once     sync.Once
	// for the rate of plain lines
	lastCount int64
	lastAt    time.Time
}

// IsTerminal reports whether w is a terminal (an *os.File whose
// descriptor is a TTY).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New returns a Reporter for cfg, a bar when Out is a terminal.
func New(cfg Config) *Reporter {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Unit == "" {
		cfg.Unit = "items"
	}
	tty := IsTerminal(cfg.Out)
	if cfg.Terminal != nil {
		tty = *cfg.Terminal
	}
	r := &Reporter{cfg: cfg, began: time.Now(), finished: make(chan struct{})}
	r.total.Store(cfg.Total)
	r.lastAt = r.began
	empty := ""
	r.at.Store(&empty)
	if tty {
		total := cfg.Total
		if total <= 0 {
			total = -1 // spinner
		}
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(cfg.Out),
			progressbar.OptionSetDescription(cfg.Desc),
			progressbar.OptionShowBytes(cfg.Bytes), // bytes: "3.0/9.0 MB, 15 MB/s"
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true), // [elapsed:left]
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionUseANSICodes(true),
		}
		if !cfg.Bytes {
			opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString(cfg.Unit)) // "120 rows/s"
		}
		r.bar = progressbar.NewOptions64(total, opts...)
	}
	return r
}

// Update reports the position (in Total's unit), the count (in Unit) and
// where the operation is, e.g. "mariadb-bin.000003:1234" or "id 5000".
func (r *Reporter) Update(pos, count int64, at string) {
	r.pos.Store(pos)
	r.count.Store(count)
	r.at.Store(&at)
}

// Run draws the bar or prints a line every Interval until Finish is
// called or ctx ends; it returns nil (ctx's end is the caller's to report).
func (r *Reporter) Run(ctx context.Context) error {
	every := r.cfg.Interval
	if r.bar != nil {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.finished:
			return nil
		case now := <-t.C:
			r.tick(now)
		}
	}
}

// SetTotal sets the position's end once it is known (after New); safe for
// concurrent use.
func (r *Reporter) SetTotal(total int64) { r.total.Store(total) }

func (r *Reporter) tick(now time.Time) {
	pos, count, at := r.pos.Load(), r.count.Load(), *r.at.Load()
	if t := r.total.Load(); t != r.cfg.Total {
		r.cfg.Total = t
		if r.bar != nil && t > 0 {
			r.bar.ChangeMax64(t)
		}
	}
	if r.bar != nil {
		r.bar.Describe(barDesc(r.cfg, count, at))
		_ = r.bar.Set64(pos)
		return
	}
	rate := Rate(count-r.lastCount, now.Sub(r.lastAt))
	r.lastCount, r.lastAt = count, now
	fmt.Fprintln(r.cfg.Out, Line(r.cfg, count, rate, pos, at, now.Sub(r.began)))
}

// Finish ends the bar (clearing it, so that the command's summary follows
// on a clean line) and stops Run. Plain lines print nothing more: the
// command's summary says the final counts.
func (r *Reporter) Finish() {
	r.once.Do(func() {
		close(r.finished)
		if r.bar != nil {
			_ = r.bar.Finish()
		}
	})
}

// Rate is n per second over d; 0 when d is not positive.
func Rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ETA is the time left at the average rate so far: elapsed × (total −
// pos) / pos; -1 when unknown (no total, nothing done yet, or past the
// total).
func ETA(pos, total int64, elapsed time.Duration) time.Duration {
	if total <= 0 || pos <= 0 || pos > total {
		return -1
	}
	return time.Duration(float64(elapsed) * float64(total-pos) / float64(pos))
}

// Line is one plain progress line, e.g. "replay: 120000 events, 35000
// events/s, at f:4, 42.0% of 9000000 bytes, ETA 7s"; the percentage and
// ETA only with a Total, the position only when it is not the count.
func Line(cfg Config, count int64, rate float64, pos int64, at string, elapsed time.Duration) string {
	unit := cfg.Unit
	if unit == "" {
		unit = "items"
	}
	s := fmt.Sprintf("%s: %d %s, %.0f %s/s", cfg.Desc, count, unit, rate, unit)
	if at != "" {
		s += ", at " + at
	}
	if cfg.Total > 0 {
		of := fmt.Sprintf("%d", cfg.Total)
		if cfg.Bytes {
			of += " bytes"
		}
		s += fmt.Sprintf(", %.1f%% of %s", 100*float64(min(max(pos, 0), cfg.Total))/float64(cfg.Total), of)
		if eta := ETA(pos, cfg.Total, elapsed); eta >= 0 {
			s += ", ETA " + eta.Round(time.Second).String()
		}
	}
	return s
}

func barDesc(cfg Config, count int64, at string) string {
	s := cfg.Desc
	if cfg.Bytes || cfg.Total <= 0 {
		s += fmt.Sprintf(" %d %s", count, cfg.Unit)
	}
	if at != "" {
		s += " at " + at
	}
	return s
}
