"""What is registered: the markers test files call, the suite catalog, static
collection, and the machine model (hardware and fingerprint) both of them name."""
