"""The optimisation pipeline the code generator runs on every Program.

Order, and why:
  1. stop_gradient   identity-like nodes out first, so every later pattern
                     sees through them (x * Identity(1) is x * 1).
  2. repeat until the signature stops changing (at most MAX_ROUNDS):
       constant_fold  fold shape-only / constant subgraphs into Literals;
       regions        inline an If whose predicate is now known, optimise
                      branch / loop bodies with this same pipeline, drop
                      loop stacks nothing reads;
       simplify       algebra on the now-visible constants (x*1, pow(x,2),
                      MulNoNan(x, 1), same-shape reshapes, ...); rewrites can
                      expose new folds (pow(x, 0) -> ones) and new duplicates;
       cse            merge duplicates (forward/backward share a lot);
       dce            drop what the above left unused.
  3. aggregation     schedule gradient sums last: it only reorders nodes,
                     and no later pass may undo that order.
Every pass keeps ir.evaluate's outputs bit-identical (see each module) and
appends (name, stats) to program.stats.
"""
from ..cache.key import program_digest
from .aggregation import aggregation
from .constant_fold import constant_fold
from .cse import cse
from .dce import dce
from .regions import regions
from .simplify import simplify
from .stop_gradient import stop_gradient

MAX_ROUNDS = 4


def run(program):
    p = stop_gradient(program)
    for _ in range(MAX_ROUNDS):
        before = program_digest(p)
        for step in (constant_fold, lambda q: regions(q, run), simplify, cse, dce):   # regions runs this on bodies
            p = step(p)
        if program_digest(p) == before:
            break
    return aggregation(p)
