"""``python -m ci_register``: list registrations, run a suite."""

from __future__ import annotations

import sys

from ci_register.cli import main

if __name__ == "__main__":
    sys.exit(main())
