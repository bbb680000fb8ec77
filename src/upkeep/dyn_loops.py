"""ENUM of Dynamic Yannakakis as generated Python, one function per anchor.

``dynamic-yannakakis-iedyn.txt`` Algorithm 1 enumerates the output of a (T, N)-rep by
walking N top-down, each node probing its parent index P_n with the variables it shares
with its parent.  Push mode (section 5, delta enumeration) enumerates only the output
tuples that extend one changed frontier tuple s (the *anchor*): the anchor's ancestors are
found bottom-up through indexes on the variables each shares with its child on the path,
then the rest of N is walked top-down as in ENUM.

This module writes that walk, for one anchor (or none: the whole output), as straight-line
Python: one nested loop or membership test per node, variables held in local names,
buckets and reducts bound as constants.  Each node costs a dictionary probe and a tuple
unpack, not a call through a matcher per node per output tuple.  A reduct is the join of
its children projected (``rho_p = pi(rho_c1 |x| rho_c2)``, section 3.2) over a positive
database, so a tuple present in a node has a match in each child: a child whose variables
its parent binds all is not tested for membership (a frontier one is only read for its
weight), nor is an ancestor on the anchor's path whose other children are each looped
over by a key (the loops find nothing when the ancestor is absent).  A frontier node's
weight is read from its reduct only while the node holds a weight other than 1
(:meth:`NodeState.count_other_weights`; a wide tuple's hash costs more than the test).
Nodes whose edge carries theta predicates (section 4) keep their matcher functions over an
environment list, which the generated code then keeps up to date as well.

The walk's steps are planned once (:func:`walk`) and written out from that plan; a
changed tuple's rows of a plain join view and an anchor key's context follow the same steps in
compiled code instead (:func:`emitter`, :func:`contexter`, :mod:`upkeep.dyn_walk`) where
N's edges carry no theta predicates.

Work is counted as tuples visited (``counter[0]``), so tests can show that push mode's work
follows the output delta (section 5) without timing anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from .dyn_walk import ContextWalk, RowsWalk
from .zset import add_into

if TYPE_CHECKING:
    from .dyn import Representation
    from .gjt import Node


class _Writer:
    """Lines of one generated function, indented as loops and tests nest."""

    def __init__(self, head: str) -> None:
        self.lines = [head]
        self.depth = 1

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def open(self, line: str) -> None:
        self.emit(line)
        self.depth += 1


class _Unit:
    """The ring's one, for any weight ring: ``_ONE * w == w * _ONE == w`` (for
    :class:`DualWeight` through its ``c == 1`` and no-channels shortcut)."""

    __slots__ = ()
    c = 1
    v = ()

    def __mul__(self, other: object) -> object:
        return other

    __rmul__ = __mul__


ONE = _Unit()


def _tuple(names: list[str]) -> str:
    return "(" + "".join(f"{n}, " for n in names) + ")"


class Step(NamedTuple):
    """One node of the walk, nested in the steps before it.  ``key_vars``: the variables
    the node is probed with (bound by the steps before); then exactly one of: ``loop``
    over its tuples with that key (its whole reduct without one), ``matched`` loop over
    its matcher's tuples (theta predicates on its edge), ``test`` that the key is a tuple
    of its reduct, or nothing (the key binds the node whole and its presence follows).
    ``weighted``: a frontier node, whose tuple's weight multiplies the output's.
    ``checked``: the path child whose edge predicates are checked once this node is bound."""

    node: Node
    key_vars: tuple[int, ...]
    loop: bool = False
    matched: bool = False
    test: bool = False
    weighted: bool = False
    checked: Node | None = None


def walk(rep: Representation, anchor: Node | None) -> list[Step]:
    """The walk of ENUM (section 3.3) over N, or anchored at a frontier node (section 5):
    the anchor's ancestors bottom-up, each probed with the variables it shares with its
    child on the path, then the rest of N top-down, each probed with the variables it
    shares with its parent."""
    states = rep.states
    steps: list[Step] = []
    on_path: set[int] = set()
    if anchor is not None:
        on_path.add(anchor.id)
        child, a = anchor, anchor.parent
        while a is not None:
            on_path.add(a.id)
            key_vars = tuple(v for v in a.vars if v in child.vars)
            checked = child if child.preds else None
            if len(key_vars) < len(a.vars):
                steps.append(Step(a, key_vars, loop=True, checked=checked))
            else:
                steps.append(Step(a, key_vars, test=not _children_tell_presence(rep, a, child),
                                  checked=checked))
            child, a = a, a.parent
    order, stack = [], [rep.pair.root]
    while stack:
        n = stack.pop()
        if n.id not in on_path:
            order.append(n)
        if not states[n.id].frontier:
            stack.extend(reversed(n.children))
    for n in order:
        frontier = states[n.id].frontier
        parent_vars = set(n.parent.vars) if n.parent is not None else set()
        key_vars = tuple(v for v in n.vars if v in parent_vars)
        if n.preds:
            steps.append(Step(n, key_vars, matched=True, weighted=frontier))
        elif len(key_vars) == len(n.vars):  # the root of a global aggregate: () or nothing
            steps.append(Step(n, key_vars, test=n.parent is None, weighted=frontier))
        else:
            steps.append(Step(n, key_vars, loop=True, weighted=frontier))
    return steps


def generate(rep: Representation, anchor: Node | None,
             rows: tuple[int, ...] | None = None) -> Callable:
    """The enumeration of ``rep``'s output tuples, as generated code.

    Without an anchor: ``run()``, a generator of ``(output tuple, weight)`` pairs over the
    whole output (ENUM, constant delay, section 3.3).

    With an anchor: ``context(key)``, the list of ``(values, weight)`` of everything an
    output tuple extending an anchor tuple with ``key`` takes from outside the anchor:
    ``values`` holds the output variables the anchor does not bind (put together with an
    anchor tuple by :func:`combiner`), ``weight`` the product of the other frontier nodes'
    weights.  The key is the anchor tuple's projection on :func:`anchor_key_vars`: by the
    running intersection property of the GJT nothing else of the anchor tuple reaches the
    rest of N, so anchor tuples sharing a key share one context.

    With an anchor and ``rows`` (output-tuple positions): ``emit(s, w, out)``, which adds
    to the Z-set ``out`` the values at ``rows`` of every output tuple extending the anchor
    tuple ``s``, each with weight ``others * w``, and returns how many it added: the
    context and the combiner in one function, called once per changed anchor tuple (no
    context list, no values tuple, no second call; the anchor tuple's values are bound
    once)."""
    pair = rep.pair
    plan = rep._plan()
    states = rep.states
    needs_env = _has_predicates(rep)
    ns: dict[str, object] = {"counter": rep.enum_work}
    if anchor is None:
        w = _Writer("def run():")
    elif rows is not None:
        w = _Writer("def emit(s, w, out):")
        w.emit("work = 0")
        w.emit("added = 0")
        ns["add_into"] = add_into
    else:
        w = _Writer("def context(key):")
        w.emit("out = []")
        w.emit("append = out.append")
        w.emit("work = 0")
    if needs_env:
        w.emit(f"env = [None] * {rep.width}")

    def visit() -> None:
        w.emit("counter[0] += 1" if anchor is None else "work += 1")

    def bind(variables: tuple[int, ...], tuple_name: str) -> None:
        names = [f"x{v}" for v in variables]
        if names:
            w.emit(f"{_tuple(names)} = {tuple_name}")
        if needs_env:
            for v in variables:
                w.emit(f"env[{v}] = x{v}")

    def read_weight(n: Node, lookup: str) -> None:
        if rows is None:
            w.emit(f"w{n.id} = {lookup}")
        else:  # integer weights: most frontier nodes hold only 1s
            ns[f"u{n.id}"] = states[n.id].count_other_weights()
            w.emit(f"w{n.id} = {lookup} if u{n.id}[0] else 1")

    weights: list[str] = []
    if anchor is not None:
        if rows is None:
            bind(anchor_key_vars(rep, anchor), "key")
        else:
            bind(anchor.vars, "s")
    for step in walk(rep, anchor):
        n = step.node
        st = states[n.id]
        ns[f"rho{n.id}"] = st.rho
        key = _tuple([f"x{v}" for v in step.key_vars])
        if step.matched:
            ns[f"m{n.id}"] = plan[n.id]
            w.open(f"for t{n.id} in m{n.id}(env):")
            bind(n.vars, f"t{n.id}")
        elif step.loop:
            source = f"rho{n.id}"
            if step.key_vars:
                ns[f"b{n.id}"] = st.index(step.key_vars).buckets
                source = f"b{n.id}.get({key}, ())"
            w.open(f"for t{n.id} in {source}:")
            bind(n.vars, f"t{n.id}")
        elif step.test:
            w.open(f"if {key} in rho{n.id}:")
        if step.weighted:
            read_weight(n, f"rho{n.id}[t{n.id}]" if step.loop or step.matched
                        else f"rho{n.id}[{key}]")
            weights.append(f"w{n.id}")
        visit()
        if step.checked is not None:
            ns[f"check{step.checked.id}"] = rep._env_check(step.checked.preds)
            w.open(f"if check{step.checked.id}(env):")
    if anchor is None:
        w.emit(f"yield {_tuple([f'x{v}' for v in pair.out])}, {' * '.join(weights)}")
    elif rows is not None:
        values = _tuple([f"x{pair.out[p]}" for p in rows])
        weight = f"({' * '.join(weights)}) * w" if weights else "w"
        w.emit(f"add_into(out, {values}, {weight})")
        w.emit("added += 1")
        w.depth = 1
        w.emit("counter[0] += work")
        w.emit("return added")
    else:
        values = _tuple([f"x{v}" for v in _context_vars(rep, anchor)])
        w.emit(f"append(({values}, {' * '.join(weights) or 'ONE'}))")
        ns["ONE"] = ONE
        w.depth = 1
        w.emit("counter[0] += work")
        w.emit("return out")
    exec("\n".join(w.lines), ns)  # noqa: S102 - generated from the tree's shape only
    return ns["run" if anchor is None else "context" if rows is None else "emit"]


def emitter(rep: Representation, anchor: Node, rows: tuple[int, ...]) -> Callable:
    """``emit(s, w, out)`` of :func:`generate` for one changed tuple: the compiled walk
    of :mod:`upkeep.dyn_walk` over :func:`walk`'s steps, or the generated code where edges
    in N carry theta predicates (their matchers read an environment the generated code
    keeps)."""
    if _has_predicates(rep):
        return generate(rep, anchor, rows)
    return RowsWalk(rep, anchor, rows, walk(rep, anchor)).emit


def contexter(rep: Representation, anchor: Node) -> Callable:
    """``context(key)`` of :func:`generate`, compiled as :func:`emitter` is."""
    if _has_predicates(rep):
        return generate(rep, anchor)
    return ContextWalk(rep, anchor_key_vars(rep, anchor), _context_vars(rep, anchor),
                       walk(rep, anchor), ONE).context


def _children_tell_presence(rep: Representation, a: Node, child: Node) -> bool:
    """Whether the walk below ``a`` (reached from its ``child`` on the anchor's path) finds
    nothing unless ``a``'s tuple is in rho_a, so that testing membership would repeat it:
    a's other children are all in N and each is a loop over a bucket keyed by part of its
    variables, which is empty when that child has no match (rho_a is the join of its
    children, section 3.2).  A child bound whole by its key, one with predicates, or one
    outside N is not looped over, so then the test stays."""
    for c in a.children:
        if c is child:
            continue
        shared = [v for v in c.vars if v in a.vars]
        if (c.id not in rep.pair.n_set or c.preds or not shared
                or len(shared) == len(c.vars)):
            return False
    return True


def _has_predicates(rep: Representation) -> bool:
    """Whether an edge within N carries theta predicates (then an environment list is kept
    for the matchers and checks that read it)."""
    return any(n.preds for n in rep.pair.nodes if n.id in rep.pair.n_set)


def anchor_key_vars(rep: Representation, anchor: Node) -> tuple[int, ...]:
    """The anchor's variables its context depends on: those it shares with its parent, or
    all of them when predicates on N's edges may read more."""
    if anchor.parent is None or _has_predicates(rep):
        return anchor.vars
    return tuple(v for v in anchor.vars if v in anchor.parent.vars)


def _context_vars(rep: Representation, anchor: Node) -> tuple[int, ...]:
    return tuple(v for v in rep.pair.out if v not in anchor.vars)


def combiner(rep: Representation, anchor: Node) -> Callable[[tuple, tuple], tuple]:
    """``(anchor tuple, context values) -> output tuple``."""
    context = _context_vars(rep, anchor)
    parts = [f"s[{anchor.vars.index(v)}]" if v in anchor.vars else f"c[{context.index(v)}]"
             for v in rep.pair.out]
    return eval("lambda s, c: " + _tuple(parts))  # noqa: S307 - positions only
