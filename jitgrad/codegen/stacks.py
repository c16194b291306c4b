"""Memory the kernel allocates at run time for lower_control.py's dynamic stacks and
lower_growing.py's growing values: a 3-word descriptor {data, rows, capacity} in the
arena whose rows grow by doubling (realloc; on failure ERR_STACK_ALLOC), freed when
the kernel returns or kept in a persistent word pair (codegen/persistent.py); and the
element copy both use for loop variables."""
from llvmlite import ir

from .irutil import I1, I8, I64, ERR_STACK_ALLOC, c64, intrinsic, mem_type

I8P = I8.as_pointer()


def copy(kb, dst_ptr, src_ptr, shape, dt):
    n = 1
    for d in shape:
        n *= d
    if n == 0:
        return
    b = kb.b
    ty = mem_type(dt).as_pointer()
    d, s = b.bitcast(dst_ptr, ty), b.bitcast(src_ptr, ty)
    if n == 1:
        b.store(b.load(s), d)
        return
    with kb.loop(n) as i:
        b.store(b.load(b.gep(s, [i])), b.gep(d, [i]))


def desc(kb, buf):
    return kb.b.bitcast(buf.ptr, I64.as_pointer())


def field(kb, d, k):
    return kb.b.gep(d, [c64(k)])


def stack_init(kb, d, keep):
    """An empty stack. keep: None (memory freed when the kernel returns) or
    the arena word index of the kernel's persistent {pointer, capacity} pair
    (codegen/persistent.py) it starts from and hands back (``stack_keep``)."""
    b = kb.b
    b.store(c64(0), field(kb, d, 1))
    if keep is None:
        b.store(c64(0), field(kb, d, 0))
        b.store(c64(0), field(kb, d, 2))
        kb.regions.finish_hooks.append(lambda: stack_free(kb, d))
        return
    pk = persistent(kb, keep)
    b.store(b.load(pk), field(kb, d, 0))
    b.store(b.load(b.gep(pk, [c64(1)])), field(kb, d, 2))


def persistent(kb, word):
    b = kb.b
    return b.bitcast(b.gep(kb.regions.arena, [c64(kb.regions.persistent_base + 8 * word)]), I64.as_pointer())


def stack_keep(kb, d, keep):
    if keep is not None:
        b = kb.b
        pk = persistent(kb, keep)
        b.store(b.load(field(kb, d, 0)), pk)
        b.store(b.load(field(kb, d, 2)), b.gep(pk, [c64(1)]))


def stack_free(kb, d):
    b = kb.b
    p = b.load(field(kb, d, 0))
    intrinsic(kb.b, "free", ir.VoidType(), [b.inttoptr(p, I8P)])


def stack_reserve(kb, d, rows, row_bytes):
    """Capacity for at least ``rows`` rows (i64), doubling; sets an error and
    returns i1 'failed' when memory is exhausted."""
    b = kb.b
    cap = b.load(field(kb, d, 2))
    grow = b.icmp_signed("<", cap, rows)
    failed = kb.alloca(I1)
    b.store(ir.Constant(I1, 0), failed)
    with b.if_then(grow):
        twice = b.mul(cap, c64(2))
        new = b.select(b.icmp_signed(">", twice, rows), twice, rows)
        new = b.select(b.icmp_signed(">", new, c64(16)), new, c64(16))
        old = b.inttoptr(b.load(field(kb, d, 0)), I8P)
        p = intrinsic(kb.b, "realloc", I8P, [old, b.mul(new, c64(max(row_bytes, 1)))])
        ok = b.icmp_unsigned("!=", b.ptrtoint(p, I64), c64(0))
        with b.if_else(ok) as (then, otherwise):
            with then:
                b.store(b.ptrtoint(p, I64), field(kb, d, 0))
                b.store(new, field(kb, d, 2))
            with otherwise:
                kb.set_error(ir.Constant(I1, 1), ERR_STACK_ALLOC)
                b.store(ir.Constant(I1, 1), failed)
    return b.load(failed)


def row_ptr(kb, base, k, row_bytes):
    b = kb.b
    return b.gep(b.bitcast(base, I8P), [b.mul(k, c64(row_bytes))])
