"""Which site feeds which subscriber: Delta's configuration kept over the live service
(``papers/delta-pubsub-view-dissemination.txt`` sections 3.3-3.5; ``specs/delta-dissemination.md``
D.6-D.8).

Every follower of the server (a subscriber, or a relay that serves others) is a *member*:
a view of the rewritability graph, with the publisher's rewriting and one rewriting over each
*site* (a relay member) whose subscription can compute its query with one input: exactly
what that relay will answer (``service/relay.py`` asks the same ``rewritings`` with k = 1).
A member that joins is placed by section 3.5's incremental rule (``dissemination/
incremental.py``): its cheapest rewriting over placed sites within their fan-out bounds, the
publisher only when none is left.  A member that leaves, lets its lease lapse or is reported
unreachable is removed, and the members it fed are placed again.  :meth:`reoptimise` solves
the ILP of Table 1 (HiGHS) and LOGA (Algorithm 2) over the whole graph, the paper's periodic
re-optimisation.

A member learns where it is fed from the answer to its join, which it renews within its
lease (``ttl``): a chain of site URLs from its feeder up to the server, each of which serves
the same subscription with the same tokens, so a member moves or falls back along it
without losing or repeating a change.  Moves are pushed: a member also watches its
assignment's :meth:`Assignment.digest` (``GET /placements/{name}``, a long poll woken by
:attr:`Placements.on_moved`) and renews as soon as it differs, instead of at its next renewal.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..dissemination.graph import (
    SOURCE,
    Configuration,
    RewritabilityGraph,
    Rewriting,
    levels,
    out_degrees,
    utilisation,
)
from ..dissemination.ilp import minimise_utilisation
from ..dissemination.incremental import place, remove
from ..dissemination.loga import minimise_latency
from ..dissemination.plan import CostModel
from ..dissemination.rewriting import Use, rewriting_sql, rewritings
from ..dissemination.subscriptions import Subscription
from ..errors import Error

NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


class PlacementError(Error):
    """A join that cannot be accepted (a bad name, URL or capacity)."""


class NameTaken(PlacementError):
    """A member name held by another principal."""


class UnknownMember(PlacementError):
    """No member of that name (never joined, left, or its lease lapsed)."""


@dataclass
class Member:
    """A follower of the server: its query, its principal, and, for a site, the URL where it
    serves and how many members it may feed."""

    name: str
    subscription: Subscription
    principal: str
    expires: float
    url: str | None = None
    capacity: int | None = None
    avoid: set[str] = field(default_factory=set)
    sid: str = ""  # the id of its subscription at the server
    compose: bool = False  # it can compute a rewriting over several sites itself

    @property
    def is_site(self) -> bool:
        return self.url is not None


@dataclass
class Assignment:
    """What a member is told: its feeders in order (nearest first; the server is implied
    after them) and how long its lease lasts; or, for a rewriting over several sites, the
    inputs to follow and the SQL that computes its result from them."""

    name: str
    feed: list[str]
    ttl: float
    inputs: list[dict] | None = None  # fed by several sites: each one's name, sql, id, feed
    sql: str | None = None  # then: the rewriting over the inputs (named by their names)

    def digest(self) -> str:
        """A short hash of where the member is fed: equal digests, no move."""
        where = json.dumps([self.feed, self.inputs, self.sql], sort_keys=True)
        return hashlib.sha256(where.encode()).hexdigest()[:16]


@dataclass
class ServiceCosts(CostModel):
    """D.17's cost model for live sites: a site ships a member its rows and runs the
    member's view over the rows it holds, work weighted by ``input_share`` (the site reads
    each batch of its input once, for all its members); the server evaluates and ships
    (``source_factor`` times the member's rows).  So a site is preferred unless its rows
    outnumber the member's by more than ``(source_factor - 1) / input_share``."""

    input_share: float = 0.1

    def from_views(self, s: Subscription, inputs: list[Subscription]) -> tuple[float, float]:
        return (self.rows(s) + self.input_share * sum(self.rows(u) for u in inputs),
                self.hop + self.processing * len(inputs))


class Placements:
    """The members and the configuration of one server.  Not thread-safe: the server holds
    its hub's lock around every call."""

    def __init__(self, *, source_bound: int | None = None, default_capacity: int = 20,
                 ttl: float = 30.0, costs: CostModel | None = None, k: int = 3,
                 clock=time.monotonic) -> None:
        self.source_bound = source_bound
        self.default_capacity = default_capacity
        self.ttl = ttl
        self.costs = costs or ServiceCosts()
        self.clock = clock
        self.members: dict[str, Member] = {}
        self.k = k
        self.uses: dict[str, list[Use]] = {}  # a rewriting over several sites: its uses
        self.rg = RewritabilityGraph()
        self.cfg: Configuration = {}
        self.moves = 0  # members whose feeder changed by a re-optimisation or a re-placement
        #: called with :meth:`state` after a call that changed the members or the
        #: configuration (the server keeps it in its directory: ``restore``)
        self.on_change: Callable[[dict], None] | None = None
        #: called (from the caller's thread) after such a call too: members' assignments
        #: may have changed (the server wakes the members watching theirs)
        self.on_moved: Callable[[], None] | None = None
        self._version = self._saved = 0  # changes made / changes handed to on_change

    # ------------------------------------------------------------ the graph
    def bounds(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {SOURCE: self.source_bound}
        for m in self.members.values():
            out[m.name] = (m.capacity if m.capacity is not None else self.default_capacity
                           ) if m.is_site else None
        return out

    def _rewriting(self, member: Member, site: Member) -> None:
        if site.url in member.avoid or site.name == member.name:
            return
        if rewritings(member.subscription, [site.subscription], k=1):
            u, lat = self.costs.from_views(member.subscription, [site.subscription])
            self.rg.add_rewriting(Rewriting(f"{member.name}<-{site.name}", member.name,
                                            (site.name,), u, lat))

    def _joins(self, member: Member, including: str | None = None) -> None:
        """The member's rewritings over several sites (CGR, ``k`` of them), which the
        member computes itself (a member that can: ``compose``); with ``including``, only
        those that read that site."""
        if not member.compose:
            return
        sites = [m.subscription for m in self.members.values()
                 if m.is_site and m.name != member.name and m.url not in member.avoid]
        for uses in rewritings(member.subscription, sites, self.k):
            inputs = tuple(sorted({use.view.name for use in uses}))
            rid = f"{member.name}<-{'+'.join(inputs)}"
            if len(inputs) < 2 or rid in self.rg.rewritings or (
                    including is not None and including not in inputs):
                continue
            u, lat = self.costs.from_views(member.subscription,
                                           [self.members[v].subscription for v in inputs])
            self.rg.add_rewriting(Rewriting(rid, member.name, inputs, u, lat))
            self.uses[rid] = uses

    def _add(self, member: Member) -> None:
        self._version += 1
        self.members[member.name] = member
        self.rg.add_view(member.name)
        u, lat = self.costs.from_source(member.subscription)
        self.rg.add_rewriting(Rewriting(f"{member.name}<-{SOURCE}", member.name, (SOURCE,),
                                        u, lat))
        for site in self.members.values():
            if site.is_site:
                self._rewriting(member, site)
        self._joins(member)
        if member.is_site:
            for other in self.members.values():
                self._rewriting(other, member)
                if other is not member:
                    self._joins(other, including=member.name)

    def _remove(self, name: str) -> None:
        self._version += 1
        before = dict(self.cfg)
        self.members.pop(name)
        orphans = remove(self.rg, self.cfg, name, self.bounds())
        self.uses = {rid: u for rid, u in self.uses.items() if rid in self.rg.rewritings}
        # section 3.5 places the orphans in turn; one that went to the server because the
        # site that could feed it was itself an orphan not yet placed gets a second chance
        for p in orphans:
            if self.rg.rewritings[p.rewriting].from_source and len(self.rg.of(p.view)) > 1:
                self.cfg.pop(p.view)
                place(self.rg, self.cfg, p.view, self.bounds())
        self.moves += sum(1 for v, r in self.cfg.items() if before.get(v) != r)

    # ------------------------------------------------------------ members
    def join(self, name: str, subscription: Subscription, principal: str, *,
             url: str | None = None, capacity: int | None = None,
             failed: list[str] = (), sid: str = "", compose: bool = False,
             up: dict[str, bool] | None = None) -> Assignment:
        """Place ``name`` (or renew its lease and tell it where it is fed now).  ``url``
        makes it a site; ``failed``: feeders it could not follow (each is probed, and
        removed if it does not answer, or else avoided by this member); ``compose``: it can
        be fed by several sites and compute its result itself; ``up``: whether each failed
        URL accepts a connection, when the caller tried it already (outside its locks)."""
        if not NAME.fullmatch(name):
            raise PlacementError(f"member name {name!r}: 1-64 letters, digits, '_', '.', '-'")
        if url is not None:
            url = site_url(url)
        if capacity is not None and capacity < 0:
            raise PlacementError(f"capacity {capacity}: must be >= 0")
        self.expire()
        for bad in failed:
            self.report(bad, name, None if up is None else up.get(bad.rstrip("/")))
        current = self.members.get(name)
        if current is not None and current.principal != principal:
            raise NameTaken(f"member name {name!r} is held by another principal")
        if current is not None and (current.subscription.select_sql() !=
                                    subscription.select_sql() or current.url != url
                                    or current.capacity != capacity
                                    or current.compose != compose):
            self._remove(name)  # joined again with another query or role: placed afresh
            current = None
        if current is None:
            member = Member(name, subscription, principal, 0.0, url, capacity, sid=sid,
                            compose=compose)
            member.avoid = {u for u in failed}
            self._add(member)
            place(self.rg, self.cfg, name, self.bounds())
            current = member
        current.expires = self.clock() + self.ttl
        self._save()
        return self.assignment(name)

    def leave(self, name: str, principal: str) -> None:
        member = self.members.get(name)
        if member is None:
            return
        if member.principal != principal:
            raise NameTaken(f"member name {name!r} is held by another principal")
        self._remove(name)
        self._save()

    def expire(self) -> list[str]:
        """Remove the members whose lease lapsed (killed or gone without leaving)."""
        now = self.clock()
        gone = [m.name for m in self.members.values() if m.expires and m.expires < now]
        for name in gone:
            if name in self.members:
                self._remove(name)
        self._save()
        return gone

    def report(self, url: str, by: str, up: bool | None = None) -> None:
        """A member could not follow the site at ``url``: a site that does not accept a
        connection is removed; one that does is avoided by that member only."""
        url = url.rstrip("/")
        site = next((m for m in self.members.values() if m.url == url), None)
        if site is None:
            return
        if not (reachable(url) if up is None else up):
            self._remove(site.name)
            return
        member = self.members.get(by)
        if member is not None and url not in member.avoid:
            self._version += 1
            member.avoid.add(url)
            for r in self.rg.of(by):
                if site.name in r.inputs:
                    self.rg.remove_rewriting(r.id)
                    self.uses.pop(r.id, None)
                    if self.cfg.get(by) == r.id:
                        self.cfg.pop(by)
            if by not in self.cfg:
                place(self.rg, self.cfg, by, self.bounds())
                self.moves += 1

    # ------------------------------------------------------------ kept across restarts
    def state(self) -> dict:
        """The members (in the order they joined) and who feeds whom, as JSON data."""
        return {"members": [
            {"name": m.name, "sql": m.subscription.sql, "principal": m.principal,
             "url": m.url, "capacity": m.capacity, "avoid": sorted(m.avoid), "sid": m.sid,
             "compose": m.compose} for m in self.members.values()],
            "cfg": dict(self.cfg), "moves": self.moves}

    def restore(self, state: dict, parse: Callable[[str, str], Subscription]) -> None:
        """Take the members and the configuration of :meth:`state` back (a restarted
        server): each member's lease starts afresh, a member whose query no longer parses
        is left out, and one whose rewriting is gone is placed again."""
        for entry in state.get("members", []):
            try:
                subscription = parse(entry["name"], entry["sql"])
            except Error:
                continue  # its table was dropped: it will join again, or not
            member = Member(entry["name"], subscription, entry["principal"],
                            self.clock() + self.ttl, entry["url"], entry["capacity"],
                            set(entry["avoid"]), entry["sid"], entry["compose"])
            self._add(member)
        saved = state.get("cfg", {})
        for name in self.members:
            rid = saved.get(name)
            if rid in self.rg.rewritings and all(
                    v == SOURCE or v in self.members for v in self.rg.rewritings[rid].inputs):
                self.cfg[name] = rid
        for name in self.members:
            if name not in self.cfg:
                place(self.rg, self.cfg, name, self.bounds())
        self.moves = state.get("moves", 0)
        self._saved = self._version

    def _save(self) -> None:
        if self._version != self._saved:
            if self.on_change is not None:
                self.on_change(self.state())
            if self.on_moved is not None:
                self.on_moved()
        self._saved = self._version

    # ------------------------------------------------------------ the configuration
    def feed(self, name: str) -> list[str]:
        """The URLs ``name`` is fed through, nearest first (empty: by the server; a member
        fed by several sites: empty, see :meth:`assignment`)."""
        chain, seen = [], {name}
        while True:
            r = self.rg.rewritings[self.cfg[name]]
            if r.from_source or len(r.inputs) > 1 or r.inputs[0] in seen:
                return chain
            name = r.inputs[0]
            seen.add(name)
            chain.append(self.members[name].url)

    def assignment(self, name: str) -> Assignment:
        """What ``name`` is told: its feed, or, fed by several sites, each input (its
        query, id and feed) and the rewriting over them as SQL."""
        rid = self.cfg[name]
        r = self.rg.rewritings[rid]
        if len(r.inputs) < 2:
            return Assignment(name, self.feed(name), self.ttl)
        inputs = [{"name": v, "sql": self.members[v].subscription.sql,
                   "id": self.members[v].sid,
                   "feed": [self.members[v].url, *self.feed(v)]} for v in r.inputs]
        return Assignment(name, [], self.ttl, inputs,
                          rewriting_sql(self.members[name].subscription, self.uses[rid]))

    def assignment_of(self, name: str, principal: str) -> Assignment:
        """Member ``name``'s assignment, asked by ``principal`` (its own only)."""
        member = self.members.get(name)
        if member is None:
            raise UnknownMember(f"no member {name!r}: it left, or its lease lapsed")
        if member.principal != principal:
            raise NameTaken(f"member name {name!r} is held by another principal")
        return self.assignment(name)

    def reoptimise(self) -> int:
        """Table 1's ILP, then LOGA, over every member; returns how many members move.
        LOGA keeps the sites' own bounds, not the paper's 1.5x of them: a relay's capacity
        is the most members it can feed."""
        self.expire()
        if not self.members:
            return 0
        bounds = self.bounds()
        solution = minimise_utilisation(self.rg, bounds, time_limit=30.0)
        cfg = minimise_latency(self.rg, solution.cfg, bounds)
        moved = sum(1 for v, r in cfg.items() if self.cfg.get(v) != r)
        self.cfg = cfg
        self.moves += moved
        self._version += bool(moved)
        self._save()
        return moved

    def describe(self) -> dict:
        """The dissemination tree for ``/status`` and the status page."""
        out = out_degrees(self.rg, self.cfg)
        level = levels(self.rg, self.cfg)
        members = []
        for m in sorted(self.members.values(), key=lambda m: (level.get(m.name, 0), m.name)):
            r = self.rg.rewritings[self.cfg[m.name]]
            members.append({"name": m.name, "site": m.url, "level": level.get(m.name, 0),
                            "fed_by": None if r.from_source else r.inputs[0],
                            "feeds": out.get(m.name, 0),
                            "capacity": self.bounds()[m.name] if m.is_site else None,
                            "subscription": m.sid, "tables": sorted(m.subscription.tables())})
        fed = sum(1 for m in members if m["fed_by"] is not None)
        return {"members": members, "sites": sum(1 for m in members if m["site"]),
                "server_feeds": out.get(SOURCE, 0), "server_bound": self.source_bound,
                "fed_by_others": fed / len(members) if members else 0.0,
                "utilisation": utilisation(self.rg, self.cfg), "moves": self.moves}


def site_url(url: str) -> str:
    """``url`` checked as a site's address (``http(s)://host:port``), without a trailing
    slash; a malformed one is a :class:`PlacementError` naming it."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port out of range
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or \
            parts.path not in ("", "/"):
        raise PlacementError(f"site URL {url!r}: expected http://host:port")
    return url.rstrip("/")


def reachable(url: str, timeout: float = 1.0) -> bool:
    """Whether the site accepts a connection: the server's test of a site reported down
    (it holds no token of the site, so it does not call its API)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False
