"""``python -m ci_register``: list registrations, run a suite."""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__" and sys.argv[1:2] == ["run"]:
    # Before the CLI loads: what the suite runner executes is recorded for test selection
    # (ci_register.running.executed); paths are relative to its --root.
    from ci_register.running.executed import argv_root, begin

    begin(argv_root(sys.argv, Path.cwd()))

from ci_register.cli import main  # noqa: E402 - after the tracer starts

if __name__ == "__main__":
    sys.exit(main())
