package consumer

import "container/list"

// lru is a bounded map: adding beyond max forgets the least recently used
// key. Not safe for concurrent use (one per partition).
type lru[K comparable, V any] struct {
	max   int
	order *list.List // front = most recent; elements hold entry[K, V]
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	k K
	v V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: make(map[K]*list.Element)}
}

func (l *lru[K, V]) get(k K) (V, bool) {
	if e, ok := l.items[k]; ok {
		l.order.MoveToFront(e)
		return e.Value.(entry[K, V]).v, true
	}
	var zero V
	return zero, false
}

func (l *lru[K, V]) put(k K, v V) {
	if e, ok := l.items[k]; ok {
		e.Value = entry[K, V]{k, v}
		l.order.MoveToFront(e)
		return
	}
	l.items[k] = l.order.PushFront(entry[K, V]{k, v})
	if l.order.Len() > l.max {
		old := l.order.Back()
		l.order.Remove(old)
		delete(l.items, old.Value.(entry[K, V]).k)
	}
}

func (l *lru[K, V]) len() int { return l.order.Len() }
