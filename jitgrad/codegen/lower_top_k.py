"""TopKV2 and its gradient pair (ops/sort_ops.py).

TopKV2 (MATERIALISE): per last-axis row, chosen by the static n and k (top_k_method): for a
small k of a long row, a heap selection of the k best, then a heapsort of them: O(n log k), in
a k-long scratch row of packed integer keys (32-bit dtypes) or in the output row; otherwise a
full sort of the row (lower_sort_rows.py: counting ranks for short rows, LSD radix for long ones). The ranking is total (larger first;
NaN above every number, jitgrad's rule; equal values by index, TF's), so the heap, not itself
stable, gives TF's stable order.
TopKGrad (MATERIALISE) scatters a gradient to its indices along the last axis; TakeAlongLastAxis
(LAYOUT) gathers there. Both check every index in the kernel (ERR_GATHER_RANGE) and clamp a bad
one to 0, so nothing outside a buffer is ever read or written.
"""
from . import lower_sort_rows as sort_rows
from .irutil import I64, c64, const, load_buf, scalarise, store_buf
from .lower_reduction import checked_index

# the heap for k at most HEAP_MAX_K and at most 1/HEAP_FRACTION of a row: of rows of 1000 float32
# (the packed heap) it took 0.25-0.4x radix's time for k = 5-10 of random rows, 0.45-0.75x of
# ascending ones (every element sifted), 0.8-1x for k = 30 and 1.4-1.5x for k = 62
HEAP_MAX_K, HEAP_FRACTION = 16, 16


def _beats(kb, dt, a, b_):
    """i1: a sorts before b_ (larger; NaN above every number)."""
    b = kb.b
    if dt.is_floating:
        a_nan = b.fcmp_unordered("uno", a, a)
        b_num = b.fcmp_ordered("ord", b_, b_)
        return b.or_(b.fcmp_ordered(">", a, b_), b.and_(a_nan, b_num))
    return b.icmp_unsigned(">", a, b_) if dt.is_unsigned else b.icmp_signed(">", a, b_)


def _outer(kb, dims, body):
    """body(idx) for every index of ``dims`` (nested loops)."""
    def rec(k, idx):
        if k == len(dims):
            body(idx)
            return
        with kb.loop(dims[k]) as i:
            rec(k + 1, idx + [(i, 0)])
    rec(0, [])


def _index_value(kb, v, out_dt):
    return kb.b.trunc(v, const(out_dt, 0).type) if out_dt.size < 8 else v


class _Heap:
    """One output row (values, indices) as a binary heap of (value, index) pairs with the
    worst-ranked pair at the root. Ranking: larger first, NaN above every number, then lower
    index first: a total order, so the unstable heap gives TF's stable order."""

    def __init__(self, kb, x, vals, inds, oidx, dt):
        self.kb, self.b, self.vals, self.inds, self.oidx, self.dt = kb, kb.b, vals, inds, oidx, dt
        self.x = x
        self.p = kb.alloca(I64)

    def entry(self, i):
        """The heap's element for x's element i of the row."""
        return (self.kb.gen(self.x, self.oidx + [(i, 0)], 1), i)

    def finish(self, k):
        """The sorted heap to the output row (here it already is)."""

    def load(self, pos):
        at = self.oidx + [(pos, 0)]
        i = load_buf(self.b, self.inds, at, 1)
        return load_buf(self.b, self.vals, at, 1), (self.b.sext(i, I64) if self.inds.dtype.size < 8 else i)

    def store(self, pos, pair):
        at = self.oidx + [(pos, 0)]
        store_buf(self.b, self.vals, at, pair[0], 1)
        store_buf(self.b, self.inds, at, _index_value(self.kb, pair[1], self.inds.dtype), 1)

    def worse(self, a, c):
        """i1: pair a ranks after pair c."""
        b = self.b
        c_beats = _beats(self.kb, self.dt, c[0], a[0])
        tie = b.not_(b.or_(c_beats, _beats(self.kb, self.dt, a[0], c[0])))
        return b.or_(c_beats, b.and_(tie, b.icmp_signed(">", a[1], c[1])))

    def sift_down(self, start, end):
        """Moves the pair at ``start`` down until both children rank before it (heap in [0, end))."""
        b = self.b
        fn = b.function
        head, pick, done = (fn.append_basic_block(f"heap.{s}") for s in ("head", "pick", "done"))
        b.store(start, self.p)
        b.branch(head)
        b.position_at_end(head)
        p = b.load(self.p)
        c = b.add(b.mul(p, c64(2)), c64(1))
        b.cbranch(b.icmp_signed("<", c, end), pick, done)
        b.position_at_end(pick)
        left = self.load(c)
        has_right = b.icmp_signed("<", b.add(c, c64(1)), end)
        c2 = b.select(has_right, b.add(c, c64(1)), c)          # (c itself when there is no right child)
        right = self.load(c2)
        take_right = b.and_(has_right, self.worse(right, left))
        child = b.select(take_right, c2, c)
        cp = tuple(b.select(take_right, r, l) for r, l in zip(right, left))
        parent = self.load(p)
        swap = self.worse(cp, parent)
        with b.if_then(swap):
            self.store(p, cp)
            self.store(child, parent)
            b.store(child, self.p)
        # continue only after a swap (a child ranked after the parent); else the heap holds
        b.cbranch(swap, head, done)
        b.position_at_end(done)


class _PackedHeap(_Heap):
    """The heap over (order key << 32 | index) integers in scratch (keys of at most 32 bits):
    the ranking, ties by index included, is one unsigned compare where _Heap's pairs need NaN
    and tie logic. The sorted heap goes to the output row at the end."""

    def __init__(self, kb, x, vals, inds, oidx, dt, scratch):
        super().__init__(kb, x, vals, inds, oidx, dt)
        self.ptr = scratch.ptr

    def entry(self, i):
        key = sort_rows.order_key(self.kb, self.kb.gen(self.x, self.oidx + [(i, 0)], 1), self.dt)
        return (self.b.or_(self.b.shl(self.b.zext(key, I64), c64(32)), i),)

    def load(self, pos):
        return (self.b.load(self.b.gep(self.ptr, [pos])),)

    def store(self, pos, e):
        self.b.store(e[0], self.b.gep(self.ptr, [pos]))

    def worse(self, a, c):
        return self.b.icmp_unsigned(">", a[0], c[0])

    def finish(self, k):
        b = self.b
        with self.kb.loop(k, vectorise=False) as j:
            i = b.and_(b.load(b.gep(self.ptr, [j])), c64(0xFFFFFFFF))
            sort_rows.emit_output(self.kb, self.x, self.vals, self.inds, self.oidx, j, i)


def top_k_method(n, k):
    """How a row of n gives its best k: "rank" (short rows), "heap" (few of a long row: one
    compare per element with the heap's root, mostly), else "radix" (the whole row sorted)."""
    if n <= sort_rows.RANK_MAX:
        return "rank"
    small_k = k * HEAP_FRACTION <= n and k <= HEAP_MAX_K
    return "heap" if small_k or n >= 2 ** 31 else "radix"     # (radix counts in i32)


def _top_k(kb, node, outs, dry):
    x = node.inputs[0]
    vals, inds = outs if not dry else (None, None)      # (no buffers in the dry run)
    shape = kb.shape(x)
    n, k = shape[-1], node.attrs["k"]
    if k == 0 or any(d == 0 for d in shape):
        return
    dt = kb.dtype(x)
    method = top_k_method(n, k)
    if method == "rank":
        scratch = sort_rows.rank_scratch(kb, n, dt)
        if not dry:
            _outer(kb, shape[:-1], lambda oidx: sort_rows.rank_row(kb, x, vals, inds, oidx, n, k, dt, scratch))
    elif method == "radix":
        scratch = sort_rows.radix_scratch(kb, n, dt)
        if not dry:
            _outer(kb, shape[:-1], lambda oidx: sort_rows.radix_row(kb, x, vals, inds, oidx, n, k, dt, scratch))
    else:
        scratch = sort_rows.packed_heap_scratch(kb, k) if sort_rows.packs(dt, n) else None
        if not dry:
            _heap_top_k(kb, x, vals, inds, shape, k, dt, scratch)


def _heap_top_k(kb, x, vals, inds, shape, k, dt, scratch):
    """Per row: the first k pairs heapified, every later pair that ranks before the root
    replaces it, then a heapsort puts the k kept best first: O(n log k), in the output row
    (scratch None) or, for keys of at most 32 bits, as packed integers in scratch."""
    n = shape[-1]
    b = kb.b

    def row(oidx):
        heap = (_Heap(kb, x, vals, inds, oidx, dt) if scratch is None
                else _PackedHeap(kb, x, vals, inds, oidx, dt, scratch))
        with kb.loop(k, vectorise=False) as i:
            heap.store(i, heap.entry(i))
        with kb.loop(k // 2, vectorise=False) as t:
            heap.sift_down(b.sub(c64(k // 2 - 1), t), c64(k))
        if n > k:
            with kb.loop(n, k, vectorise=False) as i:
                pair = heap.entry(i)
                with b.if_then(heap.worse(heap.load(c64(0)), pair)):
                    heap.store(c64(0), pair)
                    heap.sift_down(c64(0), c64(k))
        with kb.loop(k - 1, vectorise=False) as t:
            end = b.sub(c64(k - 1), t)              # the worst left goes to the back
            root, last = heap.load(c64(0)), heap.load(end)
            heap.store(end, root)
            heap.store(c64(0), last)
            heap.sift_down(c64(0), end)
        heap.finish(k)
    _outer(kb, shape[:-1], row)


def _top_k_grad(kb, node, outs, dry):
    if dry:
        return
    g, ind, _ = node.inputs
    out = outs[0]
    dt = out.dtype
    b = kb.b
    kb.emit_nest(out, lambda idx, W: const(dt, 0, W))
    gs = kb.shape(g)
    n = out.shape[-1]
    if any(d == 0 for d in gs):
        return

    def elem(idx):
        ii = checked_index(kb, ind, idx, n)
        if n == 0:
            return
        oidx = idx[:-1] + [(ii, 0)]
        cur = load_buf(b, out, oidx, 1)
        v = kb.gen(g, idx, 1)
        store_buf(b, out, oidx, b.fadd(cur, v) if dt.is_floating else b.add(cur, v), 1)
    _outer(kb, gs, elem)


def _take_along_last_axis(kb, node, j, idx, W):
    p, ind = node.inputs
    n = kb.shape(p)[-1]
    dt = node.outputs[0][1]

    def f(ix, W_):
        ii = checked_index(kb, ind, ix, n)
        if n == 0:
            return const(dt, 0, W_)
        return kb.gen(p, ix[:-1] + [(ii, 0)], W_)
    return scalarise(kb.b, f, idx, W)


MATERIALISE = {"TopKV2": _top_k, "TopKGrad": _top_k_grad}
LAYOUT = {"TakeAlongLastAxis": _take_along_last_axis}
NEEDS_BUFFER = {"TopKGrad": (1,), "TakeAlongLastAxis": (0, 1)}     # (as GatherGrad, GatherV2)
