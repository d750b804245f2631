"""Where the store's SQL differs between SQLite and PostgreSQL, stated once.

The store writes one SQL text for both engines wherever both accept it: ``?``
parameters, ``INSERT ... ON CONFLICT DO NOTHING`` (SQLite since 3.24), ``RETURNING
id``, aliased subqueries. `gates.store.pg.PgConnection` only numbers the ``?``
(``$1, $2, ...``, what psycopg's raw cursor binds without parsing the query); it
rewrites nothing else. What cannot be one text is a field of the backend's
`Dialect` below, which a statement asks for by name (``History.sql``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DIALECTS", "POSTGRESQL", "SQLITE", "Dialect"]


@dataclass(frozen=True)
class Dialect:
    name: str
    # Before a column in a condition: keeps the planner off that column's index.
    # SQLite's unary ``+`` (its planner would probe the index per row); PostgreSQL's
    # planner weighs the index by its statistics, so nothing.
    no_index: str
    # Statements that give deleted space back (SQLite: to the file system, and the WAL
    # folded in; PostgreSQL: reused by the server, no table lock).
    vacuum: tuple[str, ...]
    # The values of a JSON array bound to ``:name``, as a subquery (one bound value
    # however long the list); ``{cast}`` takes ``::bigint`` for numbers on PostgreSQL.
    json_values: str
    json_numbers: str

    def json_list(self, name: str, *, numbers: bool = False) -> str:
        """A subquery over the values of the JSON array parameter ``:name``."""
        return (self.json_numbers if numbers else self.json_values).format(name=name)


SQLITE = Dialect(
    name="sqlite",
    no_index="+",
    vacuum=("VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"),
    json_values="SELECT value FROM json_each(:{name})",
    json_numbers="SELECT value FROM json_each(:{name})",
)
POSTGRESQL = Dialect(
    name="postgresql",
    no_index="",
    vacuum=("VACUUM ANALYZE",),
    json_values="SELECT value FROM jsonb_array_elements_text(:{name}::jsonb)",
    json_numbers="SELECT value::bigint FROM jsonb_array_elements_text(:{name}::jsonb)",
)
DIALECTS = {d.name: d for d in (SQLITE, POSTGRESQL)}
