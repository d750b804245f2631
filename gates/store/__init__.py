"""The history store: `gates.store.history.History` and the parts it is built from.

`gates.store.history` holds the connection, the schema guard, the writes and the
per-run reads; `baseline_reads` the bulk reads behind the gate's baselines;
`report_reads` the reads behind reports and CI health; `rows` the typed rows
they return. Every SQL statement of the project lives in these modules.
"""
