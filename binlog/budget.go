package binlog

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// Budget bounds the memory of transactions in flight between the reader
// and the sink, in bytes (estimated by Txn.Size). The reader acquires a
// transaction's size before emitting it; the sink releases it once the
// transaction's records are acknowledged. A transaction larger than the
// whole budget takes all of it.
type Budget struct {
	sem *semaphore.Weighted
	max int64
}

// NewBudget returns a budget of max bytes (max >= 1).
func NewBudget(max int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(max), max: max}
}

// Acquire takes room for a transaction of n bytes, waiting until enough
// was released, and returns how much it took (n capped to the budget, at
// least 1): the Txn's Held. It fails only when ctx ends first.
func (b *Budget) Acquire(ctx context.Context, n int64) (int64, error) {
	n = min(max(n, 1), b.max)
	return n, b.sem.Acquire(ctx, n)
}

// Release returns n bytes: the sum of the Held of acknowledged transactions.
func (b *Budget) Release(n int64) {
	if n > 0 {
		b.sem.Release(n)
	}
}
