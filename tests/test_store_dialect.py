"""The store's SQL is one text for both engines (``gates.store.dialect``): a statement that
runs on PostgreSQL holds no SQLite-only syntax, since nothing rewrites it any more
(`gates.store.pg.translate` only numbers the ``?`` parameters)."""

from __future__ import annotations

import re
from pathlib import Path

from gates.store.dialect import DIALECTS, POSTGRESQL, SQLITE

STORE = Path(__file__).resolve().parents[1] / "gates" / "store"
# Modules whose statements run on both backends.
SHARED = ("history.py", "baseline_reads.py", "report_reads.py", "fleet_sql.py")
# Statements only ever run on an SQLite file (a snapshot's ATTACHed source and target).
SQLITE_ONLY = ("INSERT OR IGNORE INTO main.snapshot_runs",)
_OR_IGNORE = re.compile(r"\bINSERT\s+OR\s+(IGNORE|REPLACE)\b", re.IGNORECASE)
_UNARY_PLUS = re.compile(r"[\s(\"']\+[a-z_]+(\.[a-z_]+)?\s+(IN|=|<|>)", re.IGNORECASE)


def _offenders(text: str, name: str) -> list[str]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if any(ok in line for ok in SQLITE_ONLY):
            continue
        if _OR_IGNORE.search(line) or _UNARY_PLUS.search(line):
            out.append(f"{name}:{n}: {line.strip()}")
    return out


def test_shared_statements_hold_no_sqlite_only_syntax():
    found = [o for name in SHARED for o in _offenders((STORE / name).read_text(encoding="utf-8"),
                                                      name)]
    assert found == [], ("SQLite-only syntax in a statement that runs on PostgreSQL: write "
                         "INSERT ... ON CONFLICT DO NOTHING, and the index hint as "
                         "{self.sql.no_index}col:\n" + "\n".join(found))


def test_the_checker_sees_what_the_old_rewrites_covered():
    old = ('conn.execute("INSERT OR IGNORE INTO texts (text) VALUES (?)")\n'
           '    " WHERE +m.key_id IN (SELECT id FROM want)"\n'
           '    f"AND +run_id IN ({marks})"\n'
           '    x = a + b  # arithmetic, not a hint\n')
    assert [o.split(":")[1] for o in _offenders(old, "m.py")] == ["1", "2", "3"]


def test_each_backend_has_its_dialect():
    assert DIALECTS == {"sqlite": SQLITE, "postgresql": POSTGRESQL}
    assert f"{SQLITE.no_index}m.key_id" == "+m.key_id"
    assert f"{POSTGRESQL.no_index}m.key_id" == "m.key_id"
    assert SQLITE.vacuum[0] == "VACUUM" and POSTGRESQL.vacuum == ("VACUUM ANALYZE",)
