"""The history store: `gates.store.history.History` and the parts it is built from.

`gates.store.history` holds the connection and transactions (its backends:
`sqlite_backend`, `pg`); `run_writes` and `after_writes` the writes;
`baseline_reads` the gate's reads (`gate_inputs` reads one judgement's inputs through
it); `report_reads` the reads behind reports and the commands that look at one run;
`health_reads` CI health's; `planning_reads`, `merge_reads` and `fleet_sql` theirs; `rows` the typed rows
they return. Every SQL statement of the project lives in these modules.
"""
