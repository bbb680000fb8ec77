"""One value layer: how each SQL type's values are written in each format, and read back.

Every sink, source, codec and cursor encodes values through these modules, so one SQL
value has one spelling per format on both engines, and decoding takes back exactly what
encoding writes.

| SQL type            | Python (engine)    | JSON (`json_values`)              | Arrow / Parquet (`arrow_values`) | SQLite (`sqlite_values`) |
|---------------------|--------------------|-----------------------------------|----------------------------------|--------------------------|
| NULL of any type    | `None`             | `null`                            | null                             | NULL                     |
| BOOLEAN             | `bool`             | `true` / `false`                  | bool                             | 0 / 1                    |
| TINYINT ... BIGINT  | `int`              | number                            | int8 ... int64                   | INTEGER                  |
| HUGEINT             | `int`              | number (exact digits)             | decimal128(38, 0)                | text beyond 64 bits      |
| DECIMAL(p, s)       | `Decimal`          | string of its exact digits        | decimal128(p, s)                 | text of its exact digits |
| DOUBLE              | `float`            | number; `"NaN"`, `"Infinity"`, `"-Infinity"` | float64               | REAL; NaN as text `'NaN'` |
| VARCHAR             | `str`              | string                            | string                           | TEXT                     |
| DATE                | `datetime.date`    | `"YYYY-MM-DD"`                    | date32                           | text, ISO                |
| TIMESTAMP           | `datetime.datetime`| ISO 8601 `"YYYY-MM-DDTHH:MM:SS[.ffffff]"` | timestamp[us]            | text, ISO                |

A HUGEINT beyond decimal128's 38 digits (HUGEINT reaches +-1.7e38) cannot be written to
Arrow or Parquet: the value is refused naming its column.  ``Cursor.df()`` holds HUGEINT
columns as Python ints, so a DataFrame holds every value.  Queries DuckDB evaluates over
upkeep's tables get HUGEINT columns as text cast back (:func:`upkeep.views.duckdb_arrow`), so
they see every value.

A query's values of types no table holds are spelled too: TIME (`datetime.time`; JSON ISO
text; Arrow time64[us]), INTERVAL (`datetime.timedelta`; JSON an ISO duration; Arrow
duration[us]), BLOB (`bytes`; JSON base64; Arrow binary), UUID (`uuid.UUID`; JSON and Arrow
its text), and lists and structs (JSON arrays and objects; Arrow as it infers them).

Spark rows (`spark_rows`) are the JSON spelling under positional names ``c0, c1, ...``,
which Spark's ``from_json`` reads into the view's own types (``spark_type``). CSV cells are
text, read by each column's type with :func:`upkeep.types.coerce_value`, the same rule
that checks every inserted row.
"""
