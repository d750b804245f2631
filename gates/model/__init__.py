"""The statistics model: judging a metric against its baseline, the machine model, the
confirm stages. numpy and scipy only: no SQL, no files, no imports from the rest of the
project (import-linter contracts in pyproject.toml hold it so)."""
