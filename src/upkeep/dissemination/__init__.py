"""Serving subscriptions from other subscriptions: Delta's dissemination planner
(``papers/delta-pubsub-view-dissemination.txt``; ``specs/delta-dissemination.md``).

``graph`` holds the rewritability graph and configurations, ``ilp`` the utilisation-optimal
configuration under fan-out bounds (HiGHS), ``loga`` the latency greedy, ``incremental``
the placement of subscriptions that come and go.
"""
