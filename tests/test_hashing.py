"""Value hashes that place rows in partitions and keyed-state keys (``upkeep.hashing``):
equal for values SQL calls equal, the same in every process, spread over power-of-two
bucket counts."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections import Counter
from decimal import Decimal

from upkeep.hashing import key_hash, stable_hash

VALUES = [None, 0, 1, -7, 2**70, 1.5, -0.0, float("inf"), Decimal("-3.25"), "", "abc", "é",
          dt.date(2020, 1, 5), dt.datetime(2020, 1, 5, 3, 4, 5, 6), True]


def test_values_sql_calls_equal_hash_equal():
    assert stable_hash(1) == stable_hash(1.0) == stable_hash(Decimal("1.00"))
    assert stable_hash(0) == stable_hash(-0.0) == stable_hash(Decimal("-0"))
    assert stable_hash(float("nan")) == stable_hash(float("nan"))
    assert key_hash((1, "a")) == key_hash((1.0, "a")) == key_hash((Decimal("1.0"), "a"))
    assert key_hash((1, "a")) != key_hash(("a", 1))


def test_hashes_are_the_same_in_another_process():
    """Python salts str hashes per process; a row must land in the same key everywhere."""
    script = ("import datetime, json; from decimal import Decimal; inf = float('inf'); "
              "from upkeep.hashing import key_hash, stable_hash; "
              f"values = {VALUES!r}; "
              "print(json.dumps([[stable_hash(v) for v in values], key_hash(tuple(values))]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == [[stable_hash(v) for v in VALUES], key_hash(tuple(VALUES))]


def test_consecutive_keys_spread_over_every_bucket():
    buckets = Counter(key_hash((i,)) % 1024 for i in range(102_400))
    assert len(buckets) == 1024 and max(buckets.values()) < 2 * 100
