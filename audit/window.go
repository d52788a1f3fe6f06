package audit

// window is a sliding bitmap of the event ids read and not yet audited:
// ids base+1 … base+64×len(bits), one bit each.
type window struct {
	base uint64
	bits []uint64
}

// maxWindow bounds the bitmap (2^30 ids: 128 MiB): an id further ahead
// than that of the oldest unaudited one is not remembered (set reports
// false).
const maxWindow = 1 << 30

// set marks id, reporting whether it is within reach (id > base and not
// too far ahead).
func (w *window) set(id uint64) bool {
	if id <= w.base || id-w.base > maxWindow {
		return false
	}
	i := id - w.base - 1
	for uint64(len(w.bits)) <= i/64 {
		w.bits = append(w.bits, 0)
	}
	w.bits[i/64] |= 1 << (i % 64)
	return true
}

// has reports whether id was set.
func (w *window) has(id uint64) bool {
	if id <= w.base {
		return false
	}
	i := id - w.base - 1
	return i/64 < uint64(len(w.bits)) && w.bits[i/64]&(1<<(i%64)) != 0
}

// advance forgets ids at or below to. The base moves by whole words, so
// ids a little below to may stay remembered.
func (w *window) advance(to uint64) {
	if to <= w.base {
		return
	}
	words := (to - w.base) / 64
	if words >= uint64(len(w.bits)) {
		w.bits = w.bits[:0]
		w.base += words * 64
		return
	}
	w.bits = append(w.bits[:0], w.bits[words:]...)
	w.base += words * 64
}
