"""Many rows into one table at once: PostgreSQL's COPY where it is the database, a prepared executemany elsewhere.

A lab run saves every object it changed and logs each change: thousands of rows a tick while a cluster scales. On
PostgreSQL, executemany sends one INSERT per row, and each row was 0.45-0.7 ms of a save at 20,000 pods; COPY
streams them and costs half that (bench/README.md, "Saves on PostgreSQL").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

Row = Sequence[Any]


def insert(table: str, columns: Sequence[str], rows: Sequence[Row]) -> None:
    """INSERT these rows (values in `columns` order)."""
    if not rows:
        return
    names = ", ".join(columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            _copy(cursor, table, names, rows)
        else:
            placeholders = ", ".join(["%s"] * len(columns))
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({placeholders})", rows)  # noqa: S608


def upsert(table: str, columns: Sequence[str], rows: Sequence[Row], unique: Sequence[str]) -> None:
    """INSERT these rows, or where a row with the same `unique` columns exists, set its other columns. The rows'
    `unique` values must differ from each other (one statement cannot update a row twice)."""
    if not rows:
        return
    names = ", ".join(columns)
    replace = ", ".join(f"{column} = excluded.{column}" for column in columns if column not in unique)
    conflict = f"ON CONFLICT ({', '.join(unique)}) DO UPDATE SET {replace}"
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            placeholders = ", ".join(["%s"] * len(columns))
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({placeholders}) {conflict}", rows)  # noqa: S608
            return
        # COPY cannot resolve conflicts: the rows go into a scratch table of the same column types, then across.
        scratch = f"CREATE TEMPORARY TABLE upserted ON COMMIT DROP AS SELECT {names} FROM {table} WITH NO DATA"  # noqa: S608
        with transaction.atomic():
            cursor.execute(scratch)
            _copy(cursor, "upserted", names, rows)
            cursor.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM upserted {conflict}")  # noqa: S608
            cursor.execute("DROP TABLE upserted")  # a second upsert in the same transaction makes its own


def _copy(cursor: Any, table: str, names: str, rows: Sequence[Row]) -> None:
    # Django's cursor wrapper keeps psycopg's own cursor as `.cursor`; COPY is psycopg's API, not the DB-API's.
    with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
