// Package verify reads published records back from Kafka and checks the
// delivery promise: every expected event present, per-conversation seq_no
// order kept among first deliveries, each conversation on one partition,
// and every duplicate carrying the same event id as the original.
package verify
