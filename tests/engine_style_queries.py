"""Our own queries in the style of the incremental engines' public test suites (issue 22):
the constructs pg_ivm's regression tests, DBToaster's test queries and Materialize's
sqllogictest files exercise, written for upkeep over small tables ``r(a, b)``, ``s(b, c)``,
``t(c, d)`` (bags, DBToaster's R / S / T) and ``u(id, name, score, day)``.

``PYTHONPATH=. python tests/engine_style_queries.py`` prints how many are maintained
without recomputation (docs/sql.md quotes it).
"""

from __future__ import annotations

DDL = ["CREATE TABLE r (a INTEGER, b INTEGER)",
       "CREATE TABLE s (b INTEGER, c INTEGER)",
       "CREATE TABLE t (c INTEGER, d INTEGER)",
       "CREATE TABLE u (id INTEGER, name VARCHAR, score DOUBLE, day DATE)"]

#: pg_ivm's kind: joins, aggregates, DISTINCT, derived tables, CTEs, EXISTS, outer joins
PG_IVM_STYLE = [
    "SELECT a, b FROM r",
    "SELECT DISTINCT a FROM r",
    "SELECT r.a, s.c FROM r JOIN s ON r.b = s.b",
    "SELECT r.a, s.c, t.d FROM r JOIN s ON r.b = s.b JOIN t ON s.c = t.c",
    "SELECT a, count(*) AS n, sum(b) AS sb, avg(b) AS ab FROM r GROUP BY a",
    "SELECT a, min(b) AS mn, max(b) AS mx FROM r GROUP BY a",
    "SELECT count(*) AS n FROM r",
    "SELECT sum(b) AS total, min(b) AS least FROM r",
    "SELECT r.a, count(*) AS n FROM r JOIN s USING (b) GROUP BY r.a",
    "SELECT r.a, s.c FROM r LEFT JOIN s ON r.b = s.b",
    "SELECT r.a, s.c FROM r RIGHT JOIN s ON r.b = s.b",
    "SELECT r.a, s.c FROM r FULL JOIN s ON r.b = s.b",
    "SELECT r.a, s.c, t.d FROM r LEFT JOIN s ON r.b = s.b LEFT JOIN t ON s.c = t.c",
    "SELECT * FROM (SELECT a, sum(b) AS sb FROM r GROUP BY a) x WHERE sb > 2",
    "WITH x AS (SELECT b, count(*) AS n FROM s GROUP BY b) "
    "SELECT r.a, x.n FROM r JOIN x ON r.b = x.b",
    "SELECT a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.b = r.b)",
    "SELECT a FROM r WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.b = r.b)",
    "SELECT a, b FROM r WHERE b IN (SELECT b FROM s WHERE c > 1)",
    "SELECT r.a, count(s.c) AS n FROM r LEFT JOIN s ON r.b = s.b GROUP BY r.a",
    "SELECT a + b AS ab, a * 2 AS a2 FROM r WHERE a IS NOT NULL",
    "SELECT a, b FROM r WHERE a > 1 AND b < 3",
    "SELECT count(DISTINCT b) AS nb FROM r",
    "SELECT r1.a, r2.a AS a2 FROM r r1 JOIN r r2 ON r1.b = r2.a",
    "SELECT a, b FROM r UNION ALL SELECT b, c FROM s",
    "SELECT a FROM r UNION SELECT b FROM s",
    "SELECT a FROM r EXCEPT SELECT b FROM s",
    "SELECT a FROM r INTERSECT SELECT b FROM s",
    "SELECT a, CASE WHEN b > 2 THEN 'hi' WHEN b IS NULL THEN 'none' ELSE 'lo' END AS k FROM r",
    "SELECT coalesce(a, -1) AS a, count(*) AS n FROM r GROUP BY coalesce(a, -1)",
    "SELECT a, sum(b) AS sb FROM r GROUP BY a HAVING count(*) > 1",
    "SELECT s.b, count(r.a) AS n FROM s LEFT JOIN r ON r.b = s.b GROUP BY s.b "
    "HAVING count(r.a) = 0",
    "SELECT a, sum(b) * 1.0 / count(*) AS ratio FROM r GROUP BY a",
    "SELECT a % 2 AS parity, count(*) AS n FROM r GROUP BY a % 2",
]

#: DBToaster's kind: nested aggregates, inequality and cyclic joins, aggregates of aggregates
DBTOASTER_STYLE = [
    "SELECT sum(r.a * s.c) AS x FROM r, s WHERE r.b = s.b",
    "SELECT r.a, sum(s.c) AS x FROM r, s WHERE r.b = s.b GROUP BY r.a",
    "SELECT sum(a) AS x FROM r WHERE b < (SELECT sum(c) FROM s WHERE s.b = r.a)",
    "SELECT count(*) AS n FROM r WHERE r.b = (SELECT max(s.b) FROM s)",
    "SELECT r.a FROM r WHERE r.b > (SELECT avg(c) FROM s)",
    "SELECT a, (SELECT count(*) FROM s WHERE s.b = r.b) AS n FROM r",
    "SELECT sum(a) AS x FROM r WHERE 0 = (SELECT count(*) FROM s WHERE s.b = r.b)",
    "SELECT r.a, t.d FROM r, s, t WHERE r.b = s.b AND s.c = t.c AND r.a < t.d",
    "SELECT count(*) AS n FROM r, s WHERE r.a < s.c",
    "SELECT r.a, s.c FROM r, s WHERE r.b = s.b AND r.a + s.c > 3",
    "SELECT r.a FROM r, s, t WHERE r.b = s.b AND s.c = t.c AND t.d = r.a",
    "SELECT sum(r.a) AS x FROM r WHERE r.b IN (SELECT s.b FROM s, t WHERE s.c = t.c)",
    "SELECT r.a, count(*) AS n FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.b = r.b "
    "AND s.c <> r.a) GROUP BY r.a",
    "SELECT a FROM r WHERE a NOT IN (SELECT c FROM s)",
    "SELECT a FROM r WHERE b IN (SELECT b FROM s GROUP BY b HAVING count(*) > 1)",
    "SELECT a, sum(b) AS sb FROM r GROUP BY a HAVING sum(b) > (SELECT avg(c) FROM s)",
    "SELECT x.a, x.n FROM (SELECT a, count(*) AS n FROM r GROUP BY a) x "
    "JOIN (SELECT b, count(*) AS m FROM s GROUP BY b) y ON x.a = y.b",
    "SELECT sum(n) AS total FROM (SELECT a, count(*) AS n FROM r GROUP BY a) x",
    "SELECT max(sb) AS most FROM (SELECT a, sum(b) AS sb FROM r GROUP BY a) x",
    "SELECT r.a, (SELECT max(t.d) FROM t WHERE t.c = r.b) AS md FROM r",
    "SELECT r.a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.b = r.b AND s.c < r.a)",
    "SELECT s.b, sum(s.c) AS x FROM s WHERE s.c > (SELECT min(t.d) FROM t WHERE t.c = s.b) "
    "GROUP BY s.b",
    "SELECT a FROM r WHERE b < ALL (SELECT c FROM s)",
    "SELECT a, b FROM r WHERE b > ANY (SELECT d FROM t WHERE c = 1)",
]

#: Materialize's kind: outer joins with COALESCE, USING / NATURAL, top-k, FILTER, functions
MATERIALIZE_STYLE = [
    "SELECT a, b FROM r ORDER BY b DESC NULLS LAST, a LIMIT 3",
    "SELECT * FROM (SELECT a, b, row_number() OVER (PARTITION BY a ORDER BY b DESC) AS rn "
    "FROM r) WHERE rn <= 2",
    "SELECT coalesce(r.a, s.c) AS k, count(*) AS n FROM r FULL JOIN s ON r.b = s.b GROUP BY 1",
    "SELECT r.a, s.c FROM r LEFT JOIN s ON r.b = s.b WHERE s.c IS NULL",
    "SELECT a, c FROM r NATURAL JOIN s",
    "SELECT * FROM r JOIN s USING (b)",
    "SELECT r.a, s.c FROM r LEFT JOIN s USING (b)",
    "SELECT a, count(*) FILTER (WHERE b > 1) AS n FROM r GROUP BY a",
    "SELECT greatest(a, b) AS g, least(a, b) AS l FROM r",
    "SELECT DISTINCT r.a, s.c FROM r, s WHERE r.b = s.b",
    "SELECT name, score FROM u WHERE score > 0.5",
    "SELECT upper(name) AS n, length(name) AS l FROM u",
    "SELECT extract(year FROM day) AS y, count(*) AS n FROM u GROUP BY 1",
    "SELECT date_part('month', day) AS m, sum(score) AS total FROM u GROUP BY 1",
    "SELECT name, score FROM u WHERE day >= DATE '2024-01-01' AND day < DATE '2024-03-01'",
    "SELECT name FROM u WHERE name LIKE 'a%'",
    "SELECT id, score FROM u WHERE score = (SELECT max(score) FROM u)",
    "SELECT u1.id, u2.id AS other FROM u u1 JOIN u u2 ON u1.name = u2.name AND u1.id < u2.id",
    "SELECT name, count(*) AS n, avg(score) AS mean FROM u GROUP BY name "
    "HAVING avg(score) > 0.3",
    "SELECT a FROM r WHERE b BETWEEN 1 AND 3",
    "SELECT a, b FROM r WHERE a IN (1, 2) OR b IS NULL",
    "SELECT r.a FROM r WHERE a > 0 AND (EXISTS (SELECT 1 FROM s WHERE s.b = r.b))",
    "SELECT c FROM t WHERE c IN (SELECT c FROM s)",
    "WITH RECURSIVE reach(x, y) AS (SELECT b, c FROM s UNION SELECT reach.x, s.c FROM reach "
    "JOIN s ON reach.y = s.b) SELECT * FROM reach",
    "SELECT a, b FROM r WHERE a = 1 UNION ALL SELECT a, b FROM r WHERE a = 2",
    "SELECT name, id FROM u QUALIFY rank() OVER (PARTITION BY name ORDER BY score DESC) = 1",
    "SELECT id, name FROM u ORDER BY score, id LIMIT 2 OFFSET 1",
    "SELECT r.a, s.c FROM r, s WHERE r.b = s.b AND s.c NOT IN (SELECT d FROM t WHERE d > 0)",
    "SELECT id, score * 2 AS doubled, CAST(id AS DOUBLE) / 3 AS third FROM u",
    "SELECT day + 1 AS next_day, id FROM u",
    "SELECT a, b, lag(b) OVER (PARTITION BY a ORDER BY b) AS prev FROM r",
    "SELECT a, b - lag(b) OVER (PARTITION BY a ORDER BY b) AS step FROM r",
    "SELECT a, rank() OVER (PARTITION BY a ORDER BY b) AS r1, rank() OVER (ORDER BY b) AS r2 "
    "FROM r",
]

#: what upkeep leaves to DuckDB, knowingly (docs/sql.md, "What falls back to recomputation")
RECOMPUTED_STYLE: list[str] = []

#: top-k queries whose ORDER BY is total (``u.id`` is unique): one right answer
TOTAL_ORDER = {"SELECT id, name FROM u ORDER BY score, id LIMIT 2 OFFSET 1"}

QUERIES = PG_IVM_STYLE + DBTOASTER_STYLE + MATERIALIZE_STYLE + RECOMPUTED_STYLE


def summary() -> str:
    """How many of the queries upkeep maintains without recomputation."""
    import upkeep

    db = upkeep.connect()
    for ddl in DDL:
        db.execute(ddl)
    recomputed = []
    for i, sql in enumerate(QUERIES):
        db.create_view(f"q{i}", sql)
        if "recompute" in db.explain(f"q{i}"):
            recomputed.append(sql)
    kept = len(QUERIES) - len(recomputed)
    lines = [f"{kept} of {len(QUERIES)} maintained without recomputation "
             f"({kept / len(QUERIES):.0%}); recomputed:"]
    lines += [f"- `{sql}`" for sql in recomputed]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary())
