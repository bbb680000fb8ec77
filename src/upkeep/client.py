"""A Python client of ``upkeep serve``: SQL over HTTP, and subscriptions followed into a
local :class:`Replica` that resumes from its token after a disconnect or a server restart.

    client = Client("http://127.0.0.1:8765", token)
    client.sql("INSERT INTO orders VALUES (1, 'open')")
    replica = client.replica("SELECT o.id, o.status FROM orders o WHERE o.status = 'open'")
    replica.follow(until=lambda r: r.batch >= 10)
    replica.rows  # Counter of rows, equal to the query on the server's tables at r.batch
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx

from .codecs.json_values import from_json
from .errors import Error
from .types import SqlType, type_from_name


class ServiceError(Error):
    """The server refused a request (``status``: the HTTP status; ``record``: its error)."""

    fields = ("status",)

    def __init__(self, message: str, status: int | None = None, record: dict | None = None):
        super().__init__(message)
        self.status = status
        self.record = record or {}


class ReplicaError(Error):
    """A change that does not fit the replica (a row deleted that it does not hold, or
    inserted twice): a delta lost or doubled."""


@dataclass
class Result:
    columns: list[str]
    types: list[str]
    rows: list[tuple]
    rowcount: int


@dataclass
class SubscriptionInfo:
    id: str
    sql: str
    columns: list[tuple[str, str]]
    tables: list[str]


class Client:
    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})

    def _call(self, method: str, path: str, **kwargs) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise _error(response)
        return response

    def sql(self, sql: str, params: list | None = None) -> Result:
        """Run statements on the server (one atomic batch); rows decoded to Python values."""
        body = {"sql": sql} if params is None else {"sql": sql, "params": list(params)}
        data = self._call("POST", "/sql", json=body).json()
        types = [type_from_name(t) for t in data["types"]]
        rows = [decode_row(r, types) for r in data["rows"]]
        return Result(data["columns"], data["types"], rows, data["rowcount"])

    def subscribe(self, query: str) -> SubscriptionInfo:
        """The subscription to ``query`` (created on the server if no equal one exists)."""
        data = self._call("POST", "/subscriptions", json={"query": query}).json()
        return _info(data)

    def subscription(self, sid: str) -> SubscriptionInfo:
        return _info(self._call("GET", f"/subscriptions/{sid}").json())

    def unsubscribe(self, sid: str) -> None:
        self._call("DELETE", f"/subscriptions/{sid}")

    def tables(self) -> dict:
        """The tables and views this token may read: kind, columns, and a table's key."""
        return self._call("GET", "/tables").json()

    def status(self) -> dict:
        return self._call("GET", "/status").json()

    def events(self, sid: str, after: str | None = None,
               read_timeout: float | None = 60.0) -> Iterator[dict]:
        """The subscription's Server-Sent Events as dicts (``kind``, ``token``, ``batch``,
        ``rows`` or ``changes``), after ``after`` if given; ends when the server ends the
        stream."""
        params = {"after": after} if after else {}
        timeout = httpx.Timeout(10.0, read=read_timeout)
        with self._http.stream("GET", f"/subscriptions/{sid}/events", params=params,
                               timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                raise _error(response)
            yield from parse_sse(response.iter_lines())

    def replica(self, query: str, fallbacks: list[Client] = ()) -> Replica:
        """Follow ``query`` here; ``fallbacks`` (e.g. the source of this relay) must hold
        the same subscription: a client resumes there if this server goes away."""
        return Replica(self, self.subscribe(query), fallbacks)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Replica:
    """A subscription's result kept locally: ``rows`` (a Counter), the ``token`` and
    ``batch`` it is current at."""

    def __init__(self, client: Client, info: SubscriptionInfo,
                 fallbacks: list[Client] = ()) -> None:
        self.client = client
        #: where to resume, in order, when the current feeder cannot be reached (a relay
        #: that left or failed): the same subscription id and token work at each
        self.fallbacks = list(fallbacks)
        self.info = info
        self.types: list[SqlType] = [type_from_name(t) for _, t in info.columns]
        self.rows: Counter[tuple] = Counter()
        self.token: str | None = None
        self.batch = -1
        self.resets = 0
        self.reconnects = 0
        self.rehomed = 0

    def apply(self, event: dict) -> None:
        kind = event["kind"]
        if kind in ("snapshot", "reset"):
            self.rows = Counter(decode_row(r, self.types) for r in event["rows"])
            self.resets += kind == "reset"
        elif kind == "delta":
            for row, weight in event["changes"]:
                key = decode_row(row, self.types)
                count = self.rows[key] + weight
                if count < 0 or count > 1:
                    raise ReplicaError(f"batch {event['batch']}: row {key} would be held "
                                       f"{count} times (a change lost or doubled)")
                if count:
                    self.rows[key] = count
                else:
                    del self.rows[key]
        elif kind != "progress":
            return
        self.token, self.batch = event["token"], event["batch"]

    def follow(self, until: Callable[[Replica], bool] | None = None, timeout: float = 60.0,
               retry: float = 0.2, on_event: Callable[[dict], object] | None = None) -> None:
        """Apply events until ``until(self)`` holds (or the subscription ends); reconnects
        from the token after a dropped connection or a server restart.  ``on_event`` is
        called after each event is applied.  Raises TimeoutError after ``timeout``
        seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                wait = min(max(deadline - time.monotonic(), 0.1), 60.0)  # keep-alives: 15 s
                for event in self.client.events(self.info.id, self.token, read_timeout=wait):
                    self.apply(event)
                    if on_event is not None and event["kind"] != "keep-alive":
                        on_event(event)
                    if event["kind"] == "end" or (until is not None and until(self)):
                        return
                    if time.monotonic() > deadline:
                        break
            except (httpx.TransportError, httpx.StreamError):
                if self.fallbacks and not self._reachable():
                    self.client = self.fallbacks.pop(0)
                    self.rehomed += 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"subscription {self.info.id}: not done after {timeout} s "
                                   f"(at batch {self.batch})")
            self.reconnects += 1
            time.sleep(retry)


    def _reachable(self) -> bool:
        try:
            self.client.status()
            return True
        except (httpx.TransportError, ServiceError):
            return False


def parse_sse(lines: Iterator[str]) -> Iterator[dict]:
    """Events of a Server-Sent Events stream (``data`` as JSON); a comment (the server's
    keep-alive) as ``{"kind": "keep-alive"}``."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield json.loads("\n".join(data))
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line.startswith(":"):
            yield {"kind": "keep-alive"}


def decode_row(values: list, types: list[SqlType]) -> tuple:
    return tuple(from_json(v, t) for v, t in zip(values, types, strict=True))


def _info(data: dict) -> SubscriptionInfo:
    return SubscriptionInfo(data["id"], data["sql"], [tuple(c) for c in data["columns"]],
                            data["tables"])


def _error(response: httpx.Response) -> ServiceError:
    try:
        record = response.json().get("error", {})
    except ValueError:
        record = {"message": response.text[:200]}
    return ServiceError(f"HTTP {response.status_code}: {record.get('message', '')}",
                        response.status_code, record)
