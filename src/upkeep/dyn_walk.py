# cython: boundscheck=False, wraparound=False
"""The rows of one changed tuple, walked by compiled code over the steps of the walk.

``dynamic-yannakakis-iedyn.txt`` section 5 (delta enumeration): the output tuples that
extend one changed frontier tuple s are found by walking N from s, its ancestors bottom-up
and then the rest top-down (:func:`upkeep.dyn_loops.walk`).  :mod:`upkeep.dyn_loops` writes
that walk as Python that the interpreter runs; for a single-row change of a plain join
view without theta predicates, :class:`PushWalk` follows the same steps in code setup.py
compiles, where the interpreter's dispatch cost a change on FQ1 about 2,000 instructions
and a hundred mispredicted indirect branches (callgrind), a fifth of the change's time.

Variables live in one environment list indexed by variable, filled from s and then from
each tuple a step loops over; a step probes its node's index (or reduct) with a key built
from the environment.  The walk counts tuples visited into ``rep.enum_work`` as the
generated code does, so tests see the same work.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from .zset import add_into

if TYPE_CHECKING:
    from .dyn import Representation
    from .dyn_loops import Step
    from .gjt import Node

#: what a step does with its key (:class:`upkeep.dyn_loops.Step`)
LOOP, TEST, BOUND = 0, 1, 2


class WalkStep:
    """One step as the compiled walk reads it: the node's dictionaries bound, the key's
    variables and the loop's new variables as positions."""

    def __init__(self, rep: Representation, step: Step, bound: set[int]):
        st = rep.states[step.node.id]
        self.kind = LOOP if step.loop else TEST if step.test else BOUND
        self.key_vars = array("q", step.key_vars)
        self.width = len(step.key_vars)
        self.first = step.key_vars[0] if step.key_vars else -1
        self.scratch = [None] * self.width
        self.rho = st.rho
        self.buckets = st.index(step.key_vars).buckets if step.loop and step.key_vars else None
        vars_ = step.node.vars
        fresh = [i for i, v in enumerate(vars_) if v not in bound] if step.loop else []
        self.bind_at = array("q", fresh)
        self.bind_vars = array("q", [vars_[i] for i in fresh])
        self.binds = len(fresh)
        self.weighted = step.weighted
        # integer weights: most frontier nodes hold only 1s, and a wide tuple's hash costs
        # more than this test (:meth:`NodeState.count_other_weights`)
        self.others = st.count_other_weights() if step.weighted else None
        bound.update(vars_)

    def key(self, env: list) -> tuple:
        """The key the step probes with, from the environment."""
        if self.width == 1:
            return (env[self.first],)
        scratch = self.scratch
        for k in range(self.width):
            scratch[k] = env[self.key_vars[k]]
        return tuple(scratch)


class PushWalk:
    """``emit(s, w, out)`` of :func:`upkeep.dyn_loops.generate` as a compiled walk (its
    :meth:`emit`): adds to
    the Z-set ``out`` the values at ``rows`` of every output tuple extending the anchor
    tuple ``s``, each with weight ``w`` times the other frontier nodes' weights, and
    returns how many it added."""

    def __init__(self, rep: Representation, anchor: Node, rows: tuple[int, ...],
                 steps: list[Step]):
        self.anchor_vars = array("q", anchor.vars)
        self.arity = len(anchor.vars)
        self.out_vars = array("q", [rep.pair.out[p] for p in rows])
        self.row = [None] * len(rows)
        self.env = [None] * rep.width
        self.counter = rep.enum_work
        self.work = 0
        bound = set(anchor.vars)
        self.steps = [WalkStep(rep, step, bound) for step in steps]
        self.depth = len(self.steps)

    def emit(self, s: tuple, w, out: dict) -> int:
        env = self.env
        for i in range(self.arity):
            env[self.anchor_vars[i]] = s[i]
        self.work = 0
        added = self._from(0, w, out)
        self.counter[0] += self.work
        return added

    def _from(self, i: int, weight, out: dict) -> int:
        """The rows of steps ``i`` onwards, the environment bound by the steps before."""
        env = self.env
        if i == self.depth:
            row = self.row
            for k in range(len(row)):
                row[k] = env[self.out_vars[k]]
            add_into(out, tuple(row), weight)
            return 1
        step: WalkStep = self.steps[i]
        key = step.key(env)
        if step.kind == LOOP:
            source = step.rho if step.buckets is None else step.buckets.get(key)
            if source is None:
                return 0
            added = 0
            for t in source:
                for j in range(step.binds):
                    env[step.bind_vars[j]] = t[step.bind_at[j]]
                self.work += 1
                if step.weighted and step.others[0]:
                    added += self._from(i + 1, weight * step.rho[t], out)
                else:
                    added += self._from(i + 1, weight, out)
            return added
        if step.kind == TEST and key not in step.rho:
            return 0
        self.work += 1
        if step.weighted and step.others[0]:
            weight = weight * step.rho[key]
        return self._from(i + 1, weight, out)
