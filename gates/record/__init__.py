"""Recording a run: the pytest plugin and its metrics fixture, finishing a run, unit
checks, gate declarations and accepted changes. It writes through `gates.store`."""
