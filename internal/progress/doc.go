// Package progress reports the progress of a long operator command
// (replay, verify, backfill, prune): on a terminal, a bar with the
// position, the rate and the ETA (github.com/schollz/progressbar/v3);
// otherwise (a pipe, a file, a CI log) the plain lines the commands
// printed before, one every Config.Interval:
//
//	replay: 120000 events, 35000 events/s, at mariadb-bin.000003:1234, 42.0% of 9000000 bytes, ETA 7s
//
// The caller owns the Reporter's loop: it runs Reporter.Run in its
// errgroup, calls Update from its workers as often as it likes (a few
// atomic stores) and Finish when done. Whether the output is a terminal is
// decided once, by golang.org/x/term.IsTerminal on the writer's file
// descriptor (Config.Terminal overrides it).
package progress
