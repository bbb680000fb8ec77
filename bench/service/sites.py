"""Several relays (``upkeep.service.relay.RelaySite``) in one process, for the serving
benchmark: "subscriber agents in a handful of processes".  Each follows one query from the
server, joins its placements as a site of capacity ``--capacity``, and serves until the
process is terminated.  Prints one line per relay when all serve: ``<name> <url>``.

    python -m bench.service.sites URL TOKEN TOKENS_FILE --capacity 30 NAME=QUERY ...
"""

from __future__ import annotations

import argparse
import signal
import threading

from upkeep.service import Tokens
from upkeep.service.relay import RelaySite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("tokens")
    parser.add_argument("--capacity", type=int, default=None)
    parser.add_argument("relays", nargs="+", help="NAME=QUERY")
    args = parser.parse_args()
    tokens = Tokens.load(args.tokens)
    sites = []
    for spec in args.relays:
        name, _, query = spec.partition("=")
        sites.append(RelaySite(args.url, args.token, query, tokens, name=name,
                               capacity=args.capacity).start())
    for site in sites:
        print(site.lease.name, site.url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    for site in sites:
        site.stop()


if __name__ == "__main__":
    main()
