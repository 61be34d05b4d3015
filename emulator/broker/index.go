package broker

import "sort"

// seqIndex is an ordered set of records keyed by sequence number: a list of
// sorted chunks (a two-level B-tree). Sends append at the end (the common
// case, O(1) amortised); dead-lettering inserts out of order (O(log n) to find
// the chunk plus a memmove of at most maxChunk pointers); lookups and Peek
// start with two binary searches, so a page from the middle of a large entity
// costs O(log n + page). Chunks never exceed maxChunk records and neighbours
// are merged when they shrink, so the chunk list stays short.
type seqIndex struct {
	chunks [][]*record
	n      int
	spare  []*record // an emptied chunk kept for reuse (queues that drain often)
}

func (x *seqIndex) newChunk(r *record) []*record {
	if x.spare != nil {
		ch := append(x.spare, r)
		x.spare = nil
		return ch
	}
	return append(make([]*record, 0, 8), r)
}

const maxChunk = 128

// chunkFor returns the index of the first chunk whose last seq is >= seq, or
// len(chunks) when seq is past the end.
func (x *seqIndex) chunkFor(seq int64) int {
	c := x.chunks
	// Fast path: most lookups concern the tail or the head.
	if len(c) == 0 {
		return 0
	}
	if last := c[len(c)-1]; last[len(last)-1].seq < seq {
		return len(c)
	}
	if c[0][len(c[0])-1].seq >= seq {
		return 0
	}
	return sort.Search(len(c), func(i int) bool { ch := c[i]; return ch[len(ch)-1].seq >= seq })
}

func posIn(ch []*record, seq int64) int {
	if ch[0].seq >= seq {
		return 0
	}
	return sort.Search(len(ch), func(i int) bool { return ch[i].seq >= seq })
}

func (x *seqIndex) insert(r *record) {
	x.n++
	if len(x.chunks) == 0 {
		x.chunks = append(x.chunks, x.newChunk(r))
		return
	}
	ci := x.chunkFor(r.seq)
	if ci == len(x.chunks) {
		ci--
		ch := x.chunks[ci]
		if len(ch) >= maxChunk {
			nc := make([]*record, 0, maxChunk)
			x.chunks = append(x.chunks, append(nc, r))
			return
		}
		x.chunks[ci] = append(ch, r)
		return
	}
	ch := x.chunks[ci]
	p := posIn(ch, r.seq)
	ch = append(ch, nil)
	copy(ch[p+1:], ch[p:])
	ch[p] = r
	if len(ch) > maxChunk {
		half := len(ch) / 2
		right := make([]*record, len(ch)-half, maxChunk)
		copy(right, ch[half:])
		clear(ch[half:])
		ch = ch[:half]
		x.chunks = append(x.chunks, nil)
		copy(x.chunks[ci+2:], x.chunks[ci+1:])
		x.chunks[ci+1] = right
	}
	x.chunks[ci] = ch
}

func (x *seqIndex) get(seq int64) *record {
	ci := x.chunkFor(seq)
	if ci == len(x.chunks) {
		return nil
	}
	ch := x.chunks[ci]
	p := posIn(ch, seq)
	if ch[p].seq != seq {
		return nil
	}
	return ch[p]
}

func (x *seqIndex) remove(r *record) bool {
	ci := x.chunkFor(r.seq)
	if ci == len(x.chunks) {
		return false
	}
	ch := x.chunks[ci]
	p := posIn(ch, r.seq)
	if ch[p] != r {
		return false
	}
	x.n--
	switch {
	case len(ch) == 1:
		ch[0] = nil
		if cap(ch) >= 8 {
			x.spare = ch[:0]
		}
		if len(x.chunks) == 1 {
			x.chunks = x.chunks[:0]
		} else if ci == 0 {
			x.chunks[0] = nil
			x.chunks = x.chunks[1:]
		} else {
			copy(x.chunks[ci:], x.chunks[ci+1:])
			x.chunks[len(x.chunks)-1] = nil
			x.chunks = x.chunks[:len(x.chunks)-1]
		}
		return true
	case p == 0:
		// Consumers remove from the head; reslicing avoids a memmove.
		ch[0] = nil
		ch = ch[1:]
	default:
		copy(ch[p:], ch[p+1:])
		ch[len(ch)-1] = nil
		ch = ch[:len(ch)-1]
	}
	x.chunks[ci] = ch
	// Merge with the next chunk when both are small, so random removals
	// cannot leave a long list of tiny chunks.
	if len(ch) < maxChunk/4 && ci+1 < len(x.chunks) && len(ch)+len(x.chunks[ci+1]) <= maxChunk/2 {
		merged := make([]*record, 0, maxChunk)
		merged = append(merged, ch...)
		merged = append(merged, x.chunks[ci+1]...)
		x.chunks[ci] = merged
		copy(x.chunks[ci+1:], x.chunks[ci+2:])
		x.chunks[len(x.chunks)-1] = nil
		x.chunks = x.chunks[:len(x.chunks)-1]
	}
	return true
}

// ascend calls fn for records with seq >= from in ascending order until fn
// returns false.
func (x *seqIndex) ascend(from int64, fn func(*record) bool) {
	ci := x.chunkFor(from)
	if ci == len(x.chunks) {
		return
	}
	p := posIn(x.chunks[ci], from)
	for ; ci < len(x.chunks); ci++ {
		ch := x.chunks[ci]
		for ; p < len(ch); p++ {
			if !fn(ch[p]) {
				return
			}
		}
		p = 0
	}
}

// heap slots: a record sits in at most one heap of each kind, and remembers
// its position there so it can be removed or re-keyed in O(log n).
const (
	hReady  = iota // deliverable candidates, by seq
	hLock          // locked records, by lockedUntil
	hExpiry        // unlocked main records with a TTL, by expiresAt
	hSched         // scheduled records, by scheduledAt
	numHeaps
)

// recHeap is an indexed binary min-heap of records.
type recHeap struct {
	kind  uint8
	items []*record
}

func (h *recHeap) key(r *record) int64 {
	switch h.kind {
	case hLock:
		return r.lockedUntil
	case hExpiry:
		return r.expires
	case hSched:
		return r.scheduledAt
	}
	return r.seq
}

func (h *recHeap) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	ka, kb := h.key(a), h.key(b)
	if ka != kb {
		return ka < kb
	}
	return a.seq < b.seq
}

func (h *recHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].hidx[h.kind] = int32(i)
	h.items[j].hidx[h.kind] = int32(j)
}

func (h *recHeap) len() int { return len(h.items) }

func (h *recHeap) top() *record {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *recHeap) contains(r *record) bool { return r.hidx[h.kind] >= 0 }

func (h *recHeap) push(r *record) {
	if r.hidx[h.kind] >= 0 {
		return
	}
	r.hidx[h.kind] = int32(len(h.items))
	h.items = append(h.items, r)
	h.up(len(h.items) - 1)
}

func (h *recHeap) remove(r *record) {
	i := int(r.hidx[h.kind])
	if i < 0 {
		return
	}
	n := len(h.items) - 1
	if i != n {
		h.swap(i, n)
	}
	h.items[n] = nil
	h.items = h.items[:n]
	r.hidx[h.kind] = -1
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
	if cap(h.items) > 1024 && len(h.items) < cap(h.items)/4 {
		h.items = append([]*record(nil), h.items...)
	}
}

// fix restores the heap after r's key changed.
func (h *recHeap) fix(r *record) {
	i := int(r.hidx[h.kind])
	if i < 0 {
		return
	}
	if !h.down(i) {
		h.up(i)
	}
}

func (h *recHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *recHeap) down(i0 int) bool {
	i := i0
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
