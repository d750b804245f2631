"""`gate-report` and its subcommands: thin argument parsing over `gates.report`,
`gates.gate` and `gates.store`."""
