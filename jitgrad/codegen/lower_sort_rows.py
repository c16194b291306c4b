"""Full-row sorts for TopKV2 (lower_top_k.py picks one per node; shapes are static).

Both rank by an order key: the element mapped to an unsigned integer of its width whose
ascending order is the ranking (larger first; NaN above +inf, all NaNs equal; -0 equal to +0),
so comparisons are integer ones and equal keys are ties, broken by index (TF's stable order).

* rank sort (short rows): each element's output position is the number of elements ranked
  before it, counted with vectorised integer compares, O(n^2) but branch-free: for rows up to
  RANK_MAX long this beats any branchy sort, as numpy's SIMD sort does.
* LSD radix sort (long rows): 8-bit digits, one histogram pass for all digits, then a stable
  counting scatter per digit between two scratch rows (a digit that every key shares is
  skipped); stability gives index-order ties for free. O(n * bytes).

Only the first k of the sorted row are written (values re-read from x at the index, so -0
and NaN payloads come out as they went in). Every position written comes from counts that
sum to n, so scratch and output stay in bounds.
"""
from llvmlite import ir

from .. import dtypes
from .irutil import I32, I64, c64, store_buf

RANK_MAX = 128        # longest row sorted by counting ranks (n^2 compares); longer: radix
DIGIT_BITS = 8


def order_key(kb, v, dt):
    """The order key of v (an i<bits>, compared unsigned): smaller sorts first."""
    b = kb.b
    ity = ir.IntType(dt.size * 8)
    if dt.is_unsigned:
        return b.not_(v)
    maxs = ir.Constant(ity, (1 << (dt.size * 8 - 1)) - 1)
    if not dt.is_floating:
        return b.xor(v, maxs)                 # ~(v ^ sign): signed order, flipped
    bits = b.bitcast(v, ity)
    bits = b.select(b.fcmp_ordered("==", v, ir.Constant(v.type, 0.0)), ir.Constant(ity, 0), bits)   # -0 -> +0
    neg = b.icmp_signed("<", bits, ir.Constant(ity, 0))
    key = b.select(neg, bits, b.xor(bits, maxs))   # negatives: bits rise as values fall
    return b.select(b.fcmp_unordered("uno", v, v), ir.Constant(ity, 0), key)    # NaN first


def _at(b, ptr, i):
    return b.gep(ptr, [i])


def emit_output(kb, x, vals, inds, oidx, pos, i):
    """Output position pos (i64) of the row gets x's element i (i64)."""
    at = oidx + [(pos, 0)]
    store_buf(kb.b, vals, at, kb.gen(x, oidx + [(i, 0)], 1), 1)
    it = inds.dtype
    store_buf(kb.b, inds, at, kb.b.trunc(i, ir.IntType(it.size * 8)) if it.size < 8 else i, 1)


def _key_dtype(dt):
    return dtypes.int64 if dt.size == 8 else dtypes.int32


def rank_scratch(kb, n, dt):
    """The scratch the rank sort uses (ask for it in the dry run too): a row of keys and one
    of output positions."""
    return (kb.scratch_buffer((n,), _key_dtype(dt), "top_k keys"),
            kb.scratch_buffer((n,), dtypes.int32, "top_k ranks"))


def rank_row(kb, x, vals, inds, oidx, n, k, dt, scratch):
    """Output position of element i = #{j: key_j < key_i, or key_j == key_i and j < i}.
    Each j adds its compare to every i's count in one vector loop over the row (a constant
    trip count, no horizontal sums): n^2 compares at the vector width."""
    b = kb.b
    kp, rp = scratch[0].ptr, scratch[1].ptr
    with kb.loop(n) as i:
        b.store(order_key(kb, kb.gen(x, oidx + [(i, 0)], 1), dt), _at(b, kp, i))
        b.store(ir.Constant(I32, 0), _at(b, rp, i))
    with kb.loop(n, vectorise=False) as j:
        kj = b.load(_at(b, kp, j))
        j32 = b.trunc(j, I32)           # (n <= RANK_MAX: index compares at the key's width)
        with kb.loop(n) as i:
            ki = b.load(_at(b, kp, i))
            if dt.is_floating:
                # one compare a lane (vector compares share one port): ki >= kj + (i <= j),
                # the + 1 from a shift; no overflow as a float's key is never all ones (NaN's is 0)
                lower = b.ashr(b.sub(b.trunc(i, I32), b.add(j32, ir.Constant(I32, 1))), ir.Constant(I32, 31))
                before = b.icmp_unsigned(">=", ki, b.sub(kj, b.sext(lower, kj.type) if dt.size == 8 else lower))
            else:
                tie_before = b.and_(b.icmp_unsigned("==", kj, ki), b.icmp_signed("<", j32, b.trunc(i, I32)))
                before = b.or_(b.icmp_unsigned("<", kj, ki), tie_before)
            r = _at(b, rp, i)
            b.store(b.add(b.load(r), b.zext(before, I32)), r)
    with kb.loop(n, vectorise=False) as i:
        pos = b.zext(b.load(_at(b, rp, i)), I64)      # a permutation of 0..n-1
        with b.if_then(b.icmp_unsigned("<", pos, c64(k))):      # (also when k == n: never past the row)
            emit_output(kb, x, vals, inds, oidx, pos, i)


def radix_scratch(kb, n, dt):
    """Two rows of elements to scatter between (packed keys, or keys and indices) and a
    256-count histogram per digit (ask for them in the dry run too)."""
    digits = dt.size * 8 // DIGIT_BITS
    if packs(dt, n):
        rows = [kb.scratch_buffer((n,), dtypes.int64, "top_k packed keys") for _ in range(2)]
    else:
        rows = ([kb.scratch_buffer((n,), _key_dtype(dt), "top_k keys") for _ in range(2)]
                + [kb.scratch_buffer((n,), dtypes.int32, "top_k order") for _ in range(2)])
    return rows + [kb.scratch_buffer((digits << DIGIT_BITS,), dtypes.int32, "top_k histograms")]


def radix_row(kb, x, vals, inds, oidx, n, k, dt, scratch):
    """Elements are (order key << 32 | index) integers for 32-bit dtypes (one scattered store
    each), else keys and indices in two rows."""
    b = kb.b
    packed = packs(dt, n)
    ptrs = [s.ptr for s in scratch[:-1]]
    hp = scratch[-1].ptr
    cols = [ptrs[:1], ptrs[1:]] if packed else [ptrs[0::2], ptrs[1::2]]     # [source row(s), target row(s)]
    ety = ptrs[0].type.pointee              # the type digits are taken from
    low = 32 if packed else 0               # where the key's bits start in it
    digits = dt.size * 8 // DIGIT_BITS
    radix = 1 << DIGIT_BITS
    mask = ir.Constant(ety, radix - 1)

    def digit(e, d):
        return b.zext(b.trunc(b.and_(b.lshr(e, ir.Constant(ety, low + d * DIGIT_BITS)), mask), I32), I64)

    with kb.loop(digits * radix) as j:
        b.store(ir.Constant(I32, 0), _at(b, hp, j))
    with kb.loop(n) as i:           # keys, identity order, every digit's histogram in one pass
        key = order_key(kb, kb.gen(x, oidx + [(i, 0)], 1), dt)
        if packed:
            e = b.or_(b.shl(b.zext(key, I64), c64(32)), i)
            b.store(e, _at(b, cols[0][0], i))
        else:
            e = key
            b.store(key, _at(b, cols[0][0], i))
            b.store(b.trunc(i, I32), _at(b, cols[0][1], i))
        for d in range(digits):
            p = _at(b, hp, b.add(digit(e, d), c64(d * radix)))
            b.store(b.add(b.load(p), ir.Constant(I32, 1)), p)
    e0 = b.load(_at(b, cols[0][0], c64(0)))
    src = [kb.alloca(p.type) for p in cols[0]]
    dst = [kb.alloca(p.type) for p in cols[1]]
    for slot, p in zip(src + dst, cols[0] + cols[1]):
        b.store(p, slot)
    acc = kb.alloca(I32)
    for d in range(digits):
        hd = b.gep(hp, [c64(d * radix)])
        shared = b.icmp_signed("==", b.load(_at(b, hd, digit(e0, d))), ir.Constant(I32, n))
        with b.if_then(b.not_(shared)):         # a digit every key shares leaves the order as is
            b.store(ir.Constant(I32, 0), acc)
            with kb.loop(radix, vectorise=False) as j:      # counts -> first positions
                p = _at(b, hd, j)
                c = b.load(p)
                b.store(b.load(acc), p)
                b.store(b.add(b.load(acc), c), acc)
            sp, dp = [b.load(s) for s in src], [b.load(s) for s in dst]
            with kb.loop(n, vectorise=False) as i:          # stable scatter by this digit
                e = b.load(_at(b, sp[0], i))
                p = _at(b, hd, digit(e, d))
                pos = b.load(p)
                b.store(b.add(pos, ir.Constant(I32, 1)), p)
                pos = b.zext(pos, I64)
                b.store(e, _at(b, dp[0], pos))
                for s_, d_ in zip(sp[1:], dp[1:]):
                    b.store(b.load(_at(b, s_, i)), _at(b, d_, pos))
            for slot, v in zip(src + dst, dp + sp):
                b.store(v, slot)
    first = b.load(src[-1])                 # the indices' row (packed: the one row)
    with kb.loop(k, vectorise=False) as j:
        v = b.load(_at(b, first, j))
        emit_output(kb, x, vals, inds, oidx, j, b.and_(v, c64(0xFFFFFFFF)) if packed else b.zext(v, I64))


def packs(dt, n):
    """An element's order key and index fit one 64-bit integer (lower_top_k._PackedHeap)."""
    return dt.size <= 4 and n <= 1 << 32


def packed_heap_scratch(kb, k):
    return kb.scratch_buffer((k,), dtypes.int64, "top_k heap")
