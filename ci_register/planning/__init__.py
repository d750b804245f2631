"""What to run where: durations, estimates, partitions into shards, the CI matrix,
change-based selection and the schedule."""
