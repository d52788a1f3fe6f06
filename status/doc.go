// Package status reads and prints where the publisher stands: the stored
// checkpoint, the server's binlog end, the lag between them in bytes and
// seconds, and the retention headroom before the next purge.
package status
