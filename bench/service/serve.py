"""``upkeep serve`` under many subscribers, all fed by the server (the direct baseline of
``specs/delta-dissemination.md`` D.14's deployment experiment, as Materialize's SUBSCRIBE
serves them).

The server runs as ``upkeep serve`` in its own process over a durable directory (fsync on),
with ``items(id, category, region, price)`` loaded first.  ``--subscribers`` clients, in one
asyncio process, each follow one of ``--queries`` distinct subscriptions (``category = c AND
region = r``, round robin) over Server-Sent Events.  A writer then commits ``--batches``
batches of ``--changes`` random price updates, at most ``--rate`` batches a second.
Measured: delta latency (the writer sending a batch to a subscriber receiving its event),
p50 / p99 over every (subscriber, batch) pair that has a change; the server's CPU seconds
(``/proc``); the bytes of events the server sent (its ``/status``) and the subscribers
received; the writer's commits a second.

The subscribers are fed in one of three layouts (``--layouts``), each placed by the
server's planner (``POST /placements``, ``service/placement.py``): a subscriber joins, is
told its feeder, and follows it.

* ``direct``: no sites; every subscriber is fed by the server, as Materialize's SUBSCRIBE
  or RisingWave's subscriptions serve them.
* ``general``: ``--relays R`` relays (``upkeep relay``, each its own process), relay ``r``
  following every item of a contiguous range of categories; the planner places each
  subscriber at the relay whose rows can compute its query.
* ``agents``: the paper's own setting, subscribers that serve: for each distinct query, one
  subscriber agent is a site (capacity ``--capacity``) and the planner places the other
  subscribers of that query at it.  The agents run as relays, ``--hosts`` processes holding
  them all (``bench/service/sites.py``).

Usage::

    python -m bench.service.serve --subscribers 100,1000 --layouts direct,general,agents

Results go to ``bench/results/service.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common.environment import git_rev, machine, now

TOKEN = "bench-token-0123456789"
RESULTS = Path(__file__).resolve().parents[1] / "results" / "service.json"
RELAYS: list[subprocess.Popen] = []  # killed at the end of a run, whatever happens


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def follow(client: httpx.AsyncClient, sid: str, received: dict, counter: list,
                 ready: asyncio.Event, started: list, total: int) -> None:
    """One subscriber: records (batch -> arrival time) of its delta events and bytes."""
    async with client.stream("GET", f"/subscriptions/{sid}/events") as response:
        async for line in response.aiter_lines():
            counter[0] += len(line) + 1
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if event["kind"] == "snapshot":
                started[0] += 1
                if started[0] == total:
                    ready.set()
            elif event["kind"] == "delta":
                received.setdefault(event["batch"], time.perf_counter())
            elif event["kind"] in ("end", "shutdown"):
                return


def derived(q: int) -> str:
    """Subscription ``q``: the items of one category and region."""
    return (f"SELECT i.id, i.price FROM items i WHERE i.category = {q % 20} "
            f"AND i.region = {q // 20 % 10}")


async def answering(client: httpx.AsyncClient, seconds: float = 60.0) -> None:
    """Wait until the server or relay behind ``client`` answers."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if (await client.get("/status")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{client.base_url} did not answer in {seconds} s")


def relay_range(r: int, count: int) -> tuple[int, int]:
    """The categories relay ``r`` of ``count`` follows: a contiguous share of the 20."""
    return r * 20 // count, (r + 1) * 20 // count


def start_sites(url: str, work: Path, layout: str, relays: int, queries: int, hosts: int,
                capacity: int) -> tuple[list[subprocess.Popen], int]:
    """The processes of a layout's sites, and how many sites they offer the server."""
    tokens = str(work / "tokens.json")
    if layout == "direct":
        return [], 0
    if layout == "general":
        processes = []
        for r in range(relays):
            low, high = relay_range(r, relays)
            query = (f"SELECT i.id, i.category, i.region, i.price FROM items i "
                     f"WHERE i.category >= {low} AND i.category < {high}")
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "upkeep.cli", "relay", url, query, "--token", TOKEN,
                 "--tokens", tokens, "--port", str(free_port()), "--name", f"relay-{r}",
                 "--capacity", "100000"], stdout=subprocess.DEVNULL))
        return processes, relays
    processes = []
    for h in range(hosts):
        mine = [f"agent-{q}={derived(q)}" for q in range(queries) if q % hosts == h]
        if mine:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "bench.service.sites", url, TOKEN, tokens,
                 "--capacity", str(capacity), *mine], stdout=subprocess.DEVNULL))
    return processes, queries


async def sites_joined(client: httpx.AsyncClient, count: int, processes: list,
                       seconds: float = 600.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise RuntimeError("a site process exited")
        status = (await client.get("/status")).json()
        if status["placement"]["sites"] >= count:
            return
        await asyncio.sleep(0.5)
    raise TimeoutError(f"{count} sites did not join in {seconds} s")


async def run(subscribers: int, queries: int, batches: int, changes: int, rate: float,
              rows: int, layout: str, relays: int, hosts: int, capacity: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="upkeep-serve-bench-"))
    (work / "tokens.json").write_text(json.dumps({"tokens": {
        TOKEN: {"name": "bench", "read": "*", "write": "*", "admin": True}}}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "upkeep.cli", "serve", str(work / "db"),
                               "--tokens", str(work / "tokens.json"), "--port", str(port),
                               "--replan", "0"],
                              stdout=subprocess.DEVNULL)
    try:
        return await measure(server, url, work, subscribers, queries, batches, changes, rate,
                             rows, layout, relays, hosts, capacity)
    finally:
        for process in [server, *RELAYS]:
            if process.poll() is None:
                process.kill()
                process.wait()
        RELAYS.clear()


async def measure(server: subprocess.Popen, url: str, work: Path, subscribers: int,
                  queries: int, batches: int, changes: int, rate: float, rows: int,
                  layout: str, relays: int, hosts: int, capacity: int) -> dict:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=subscribers + 10, max_keepalive_connections=20)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits,
                                 timeout=httpx.Timeout(60.0)) as client:
        await answering(client)
        rnd = random.Random(1)
        await client.post("/sql", json={"sql": "CREATE TABLE items (id INTEGER PRIMARY KEY, "
                                               "category INTEGER, region INTEGER, price DOUBLE)"})
        for start in range(0, rows, 5000):
            values = ", ".join(f"({k}, {rnd.randrange(20)}, {rnd.randrange(10)}, "
                               f"{rnd.randrange(10000) / 100})"
                               for k in range(start, min(rows, start + 5000)))
            (await client.post("/sql", json={"sql": f"INSERT INTO items VALUES {values}"}
                               )).raise_for_status()
        relay_processes, site_count = start_sites(url, work, layout, relays, queries, hosts,
                                                  capacity)
        RELAYS.extend(relay_processes)
        await sites_joined(client, site_count, relay_processes)
        feeders: dict[str, httpx.AsyncClient] = {}
        places, feeds = [], []
        for i in range(subscribers):  # each placed by the server's planner
            t = time.perf_counter()
            response = await client.post("/placements", json={
                "query": derived(i % queries), "name": f"s{i}"})
            places.append(time.perf_counter() - t)
            response.raise_for_status()
            data = response.json()
            feed = data["feed"][0] if data["feed"] else None
            if feed is not None and feed not in feeders:
                feeders[feed] = httpx.AsyncClient(base_url=feed, headers=headers,
                                                  limits=limits, timeout=httpx.Timeout(60.0))
            if feed is not None:  # the subscription at the site it was placed at
                (await feeders[feed].post("/subscriptions", json={"query": derived(
                    i % queries)})).raise_for_status()
            feeds.append((feeders[feed] if feed else client, data["subscription"]["id"]))
        placement = (await client.get("/status")).json()["placement"]
        received = [dict() for _ in range(subscribers)]
        counter, started, ready = [0], [0], asyncio.Event()
        tasks = [asyncio.create_task(follow(feeder, sid, received[i], counter, ready, started,
                                            subscribers))
                 for i, (feeder, sid) in enumerate(feeds)]
        await asyncio.wait_for(ready.wait(), 300)
        status = (await client.get("/status")).json()
        first, sent0 = status["batch"], status["bytes_sent"]
        cpu0, bytes0, sent, t0 = cpu_seconds(server.pid), counter[0], {}, time.perf_counter()
        for b in range(batches):
            keys = rnd.sample(range(rows), changes)
            sql = "; ".join(f"UPDATE items SET price = {rnd.randrange(10000) / 100} "
                            f"WHERE id = {k}" for k in keys)
            sent[first + b + 1] = time.perf_counter()
            (await client.post("/sql", json={"sql": sql})).raise_for_status()
            await asyncio.sleep(max(0.0, (b + 1) / rate - (time.perf_counter() - t0)))
        write_seconds = time.perf_counter() - t0
        last = first + batches
        deadline = time.perf_counter() + 120
        expected = set(range(first + 1, last + 1))
        while time.perf_counter() < deadline:
            got = sum(len(expected & r.keys()) for r in received)
            await asyncio.sleep(0.2)
            if got == sum(len(expected & r.keys()) for r in received):
                break  # nothing new arrived: every delta that will come has come
        cpu = cpu_seconds(server.pid) - cpu0
        total_bytes = counter[0] - bytes0
        server_bytes = (await client.get("/status")).json()["bytes_sent"] - sent0
        relay_cpu = sum(cpu_seconds(p.pid) for p in relay_processes)
        for process in relay_processes:
            process.terminate()
        for process in relay_processes:
            process.wait(30)
        for feeder in feeders.values():
            await feeder.aclose()
        latencies = [r[b] - sent[b] for r in received for b in expected if b in r]
        server.terminate()
        server.wait(30)
        for task in tasks:
            task.cancel()
    latencies.sort()
    places.sort()
    return {"subscribers": subscribers, "layout": layout, "sites": site_count,
            "site_processes": len(relay_processes), "queries": queries,
            "fed_by_others": sum(1 for m in placement["members"]
                                 if m["fed_by"] is not None and not m["site"]) / subscribers,
            "server_feeds": placement["server_feeds"],
            "placement_ms_p50": 1000 * statistics.median(places),
            "placement_ms_p99": 1000 * places[int(0.99 * (len(places) - 1))],
            "batches": batches, "server_bytes_sent": server_bytes,
            "relays_cpu_s": relay_cpu,
            "changes_per_batch": changes, "rows": rows, "rate": rate,
            "deliveries": len(latencies),
            "latency_p50_ms": 1000 * statistics.median(latencies) if latencies else None,
            "latency_p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))]
            if latencies else None,
            "server_cpu_s": cpu, "bytes_received": total_bytes,
            "bytes_per_batch": total_bytes / batches,
            "commits_per_s": batches / write_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", default="100,1000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--layouts", default="direct,general,agents",
                        help="how subscribers are fed: direct, general, agents")
    parser.add_argument("--relays", type=int, default=10, help="relays of the general layout")
    parser.add_argument("--hosts", type=int, default=5,
                        help="processes holding the agents of the agents layout")
    parser.add_argument("--capacity", type=int, default=30,
                        help="fan-out bound of each agent")
    args = parser.parse_args()
    results = []
    for n in map(int, args.subscribers.split(",")):
        for layout in args.layouts.split(","):
            result = asyncio.run(run(n, min(args.queries, n), args.batches, args.changes,
                                     args.rate, args.rows, layout, args.relays, args.hosts,
                                     args.capacity))
            print(json.dumps(result), flush=True)
            results.append(result)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": machine(), "rev": git_rev(), "date": now(),
                                   "command": "python -m bench.service.serve " +
                                   " ".join(sys.argv[1:]), "results": results}, indent=1))


if __name__ == "__main__":
    main()
