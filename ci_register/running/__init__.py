"""Running a suite: the runner, its supervision and watchdog, reruns, the hardware
check, the pytest plugin and the nox sessions."""
