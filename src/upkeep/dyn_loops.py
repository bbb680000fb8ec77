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
unpack, not a call through a matcher per node per output tuple.  Nodes whose edge carries
theta predicates (section 4) keep their matcher functions over an environment list, which
the generated code then keeps up to date as well.

Work is counted as tuples visited (``counter[0]``), so tests can show that push mode's work
follows the output delta (section 5) without timing anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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


def _tuple(names: list[str]) -> str:
    return "(" + "".join(f"{n}, " for n in names) + ")"


def generate(rep: Representation, anchor: Node | None) -> Callable:
    """The enumeration of ``rep``'s output tuples extending a tuple of ``anchor`` (all of
    them when ``anchor`` is None), as ``(output tuple, weight)`` pairs.

    With an anchor the function is ``run(s, anchor_weight)``: it returns a list, and the
    weight is the product of the other frontier nodes' weights times ``anchor_weight``
    (pass the ring's one to leave the anchor's own factor out).  Without an anchor it is
    ``run()``, a generator (constant delay, section 3.3)."""
    pair = rep.pair
    n_set = pair.n_set
    plan = rep._plan()
    states = rep.states
    needs_env = any(n.preds for n in pair.nodes if n.id in n_set)
    ns: dict[str, object] = {"counter": rep.enum_work}
    if anchor is None:
        w = _Writer("def run():")
    else:
        w = _Writer("def run(s, anchor_weight):")
        w.emit("out = []")
        w.emit("append = out.append")
        w.emit("work = 0")
    if needs_env:
        w.emit(f"env = [None] * {rep.width}")
    bound: set[int] = set()

    def visit() -> None:
        w.emit("counter[0] += 1" if anchor is None else "work += 1")

    def bind(node: Node, tuple_name: str) -> None:
        names = [f"x{v}" for v in node.vars]
        if names:
            w.emit(f"{_tuple(names)} = {tuple_name}")
        if needs_env:
            for v in node.vars:
                w.emit(f"env[{v}] = x{v}")
        bound.update(node.vars)

    weights: list[str] = []
    path: list[Node] = []
    if anchor is not None:
        # the anchor and its ancestors, bottom-up (section 5: anchored at a frontier tuple)
        ns[f"rho{anchor.id}"] = states[anchor.id].rho
        w.open(f"if s in rho{anchor.id}:")
        bind(anchor, "s")
        weights.append("anchor_weight")
        child, a = anchor, anchor.parent
        path.append(anchor)
        while a is not None:
            path.append(a)
            st = states[a.id]
            key_vars = tuple(v for v in a.vars if v in child.vars)
            key = _tuple([f"x{v}" for v in key_vars])
            if len(key_vars) == len(a.vars):
                ns[f"rho{a.id}"] = st.rho
                w.open(f"if {key} in rho{a.id}:")
            else:
                ns[f"b{a.id}"] = st.index(key_vars).buckets if key_vars else None
                source = f"b{a.id}.get({key}, ())" if key_vars else f"rho{a.id}"
                ns[f"rho{a.id}"] = st.rho
                w.open(f"for t{a.id} in {source}:")
                bind(a, f"t{a.id}")
            visit()
            if child.preds:
                ns[f"check{child.id}"] = rep._env_check(child.preds)
                w.open(f"if check{child.id}(env):")
            child, a = a, a.parent
    on_path = {n.id for n in path}
    # the rest of N top-down, each node probing the variables it shares with its parent
    order, stack = [], [pair.root]
    while stack:
        n = stack.pop()
        if n.id not in on_path:
            order.append(n)
        if not states[n.id].frontier:
            stack.extend(reversed(n.children))
    for n in order:
        st = states[n.id]
        frontier = st.frontier
        ns[f"rho{n.id}"] = st.rho
        parent_vars = set(n.parent.vars) if n.parent is not None else set()
        key_vars = tuple(v for v in n.vars if v in parent_vars)
        key = _tuple([f"x{v}" for v in key_vars])
        if n.preds:
            ns[f"m{n.id}"] = plan[n.id]
            w.open(f"for t{n.id} in m{n.id}(env):")
            bind(n, f"t{n.id}")
            if frontier:
                w.emit(f"w{n.id} = rho{n.id}[t{n.id}]")
        elif len(key_vars) == len(n.vars):
            if frontier:
                w.emit(f"w{n.id} = rho{n.id}.get({key})")
                w.open(f"if w{n.id} is not None:")
            else:
                w.open(f"if {key} in rho{n.id}:")
        else:
            source = f"rho{n.id}"
            if key_vars:
                ns[f"b{n.id}"] = st.index(key_vars).buckets
                source = f"b{n.id}.get({key}, ())"
            w.open(f"for t{n.id} in {source}:")
            bind(n, f"t{n.id}")
            if frontier:
                w.emit(f"w{n.id} = rho{n.id}[t{n.id}]")
        visit()
        if frontier:
            weights.append(f"w{n.id}")
    out = _tuple([f"x{v}" for v in pair.out])
    assert weights, "N has a frontier node"
    weight = " * ".join(weights)
    w.emit(f"yield {out}, {weight}" if anchor is None else f"append(({out}, {weight}))")
    if anchor is not None:
        w.depth = 1
        w.emit("counter[0] += work")
        w.emit("return out")
    exec("\n".join(w.lines), ns)  # noqa: S102 - generated from the tree's shape only
    return ns["run"]
