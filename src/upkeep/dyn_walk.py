# cython: boundscheck=False, wraparound=False
"""Push mode's walk from a changed tuple, followed by compiled code over the walk's steps.

``dynamic-yannakakis-iedyn.txt`` section 5 (delta enumeration): the output tuples that
extend one changed frontier tuple s are found by walking N from s, its ancestors bottom-up
and then the rest top-down (:func:`upkeep.dyn_loops.walk`).  :mod:`upkeep.dyn_loops` writes
that walk as Python that the interpreter runs; where N's edges carry no theta predicates
the walks of push mode follow the same steps here, in code setup.py compiles:
:class:`RowsWalk` makes a changed tuple's rows of a plain join view (FQ1), and
:class:`ContextWalk` an anchor key's context (the dyn-aggregate views, Q3).  On FQ1 the
interpreter's dispatch had cost a change about 1,500 instructions and 90
mispredicted branches (callgrind).

Variables live in one environment list indexed by variable, filled from the anchor's
tuple (or key) and then from each tuple a step loops over; a step probes its node's index
(or reduct) with a key built from the environment.  The walk counts tuples visited into
``rep.enum_work`` as the generated code does, so tests see the same work.
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
        if step.matched or step.checked is not None:
            raise ValueError("theta predicates on N's edges: walk them as generated code")
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
        self.node_id = step.node.id
        # a rows walk's integer weights: most frontier nodes hold only 1s, and a wide
        # tuple's hash costs more than testing this count (RowsWalk)
        self.others = None
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
    """The walk from an anchor tuple's bound variables: what it does at each output tuple
    reached (:meth:`_leaf`) is its subclass's.  ``bound``: the variables bound before the
    walk, in the order the caller's tuple holds them; ``gathered``: the variables whose
    values a leaf reads (:meth:`_gathered`).  A walk reuses its buffers (the environment,
    the gathered values, each step's key), so one walk runs one call at a time, as a
    view's maintenance does under its connection."""

    def __init__(self, rep: Representation, bound: tuple[int, ...], steps: list[Step],
                 gathered: tuple[int, ...]):
        self.gather_vars = array("q", gathered)
        self.gathered = [None] * len(gathered)
        self.bound_vars = array("q", bound)
        self.arity = len(bound)
        self.env = [None] * rep.width
        self.counter = rep.enum_work
        self.work = 0
        known = set(bound)
        self.steps = [WalkStep(rep, step, known) for step in steps]
        self.depth = len(self.steps)

    def _walk(self, values: tuple, weight) -> int:
        """Bind ``values``, walk every step, count the work; returns the leaves reached."""
        if len(values) != self.arity:  # checked: the module reads tuples unchecked
            raise ValueError(f"a walk binds {self.arity} values, not {len(values)}")
        env = self.env
        for i in range(self.arity):
            env[self.bound_vars[i]] = values[i]
        self.work = 0
        reached = self._from(0, weight)
        self.counter[0] += self.work
        return reached

    def _from(self, i: int, weight) -> int:
        """The leaves of steps ``i`` onwards, the environment bound by the steps before."""
        if i == self.depth:
            return self._leaf(weight)
        env = self.env
        step: WalkStep = self.steps[i]
        if step.kind == LOOP:
            source = step.rho if step.buckets is None else dict.get(step.buckets, step.key(env))
            if source is None:
                return 0
            reached = 0
            for t in source:
                for j in range(step.binds):
                    env[step.bind_vars[j]] = t[step.bind_at[j]]
                self.work += 1
                if step.weighted and (step.others is None or step.others[0]):
                    reached += self._from(i + 1, weight * step.rho[t])
                else:
                    reached += self._from(i + 1, weight)
            return reached
        if step.kind == TEST and not dict.__contains__(step.rho, step.key(env)):
            return 0
        self.work += 1
        if step.weighted and (step.others is None or step.others[0]):
            weight = weight * step.rho[step.key(env)]
        return self._from(i + 1, weight)

    def _leaf(self, weight) -> int:
        raise NotImplementedError

    def _gathered(self) -> tuple:
        """The values of the gathered variables at this leaf."""
        env, values = self.env, self.gathered
        for k in range(len(values)):
            values[k] = env[self.gather_vars[k]]
        return tuple(values)


class RowsWalk(PushWalk):
    """``emit(s, w, out)`` of :func:`upkeep.dyn_loops.generate` (its :meth:`emit`): adds
    to the Z-set ``out`` the values at ``rows`` of every output tuple extending the anchor
    tuple ``s``, each with weight ``w`` times the other frontier nodes' weights (integers:
    a node's weight is read only while it holds one other than 1), and returns how many it
    added."""

    def __init__(self, rep: Representation, anchor: Node, rows: tuple[int, ...],
                 steps: list[Step]):
        super().__init__(rep, anchor.vars, steps, tuple(rep.pair.out[p] for p in rows))
        self.out = None
        for step in self.steps:
            if step.weighted:
                step.others = rep.states[step.node_id].count_other_weights()

    def emit(self, s: tuple, w, out: dict) -> int:
        self.out = out
        try:
            return self._walk(s, w)
        finally:
            self.out = None

    def _leaf(self, weight) -> int:
        add_into(self.out, self._gathered(), weight)
        return 1


class ContextWalk(PushWalk):
    """``context(key)`` of :func:`upkeep.dyn_loops.generate` (its :meth:`context`): the
    list of ``(values, weight)`` of every output tuple extending an anchor tuple with
    ``key``, ``values`` the output variables the anchor does not bind, ``weight`` the
    product of the other frontier nodes' weights (any ring: every weight is read), from
    ``one``, the ring's unit."""

    def __init__(self, rep: Representation, key_vars: tuple[int, ...],
                 values: tuple[int, ...], steps: list[Step], one: object):
        super().__init__(rep, key_vars, steps, values)
        self.one = one
        self.found = None

    def context(self, key: tuple) -> list:
        found = self.found = []
        try:
            self._walk(key, self.one)
        finally:
            self.found = None
        return found

    def _leaf(self, weight) -> int:
        self.found.append((self._gathered(), weight))
        return 1
