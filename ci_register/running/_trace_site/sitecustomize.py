"""Starts the executed-functions tracer of a traced suite run in every Python process.

``ci_register.running.executed.begin`` puts this folder first on ``PYTHONPATH`` with
``CI_REGISTER_EXECUTED_DIR``; Python imports ``sitecustomize`` at start-up, before the
program's own code, so pytest, a test's server and its workers are traced from their first
line. The tracer's module is loaded by path (importing the ``ci_register`` package here
would run its code before the tracer starts). Then the next ``sitecustomize`` on the path
(a distribution's own) runs as it would have.
"""

import os
import sys


def _start() -> None:
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.environ.get("CI_REGISTER_EXECUTED_DIR")
    if not folder:
        return
    try:
        spec = importlib.util.spec_from_file_location("_ci_register_executed", os.path.join(os.path.dirname(here), "executed.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        mod.start_from_env()
    except Exception as exc:  # noqa: BLE001 - a child must start even so; its record says why it is incomplete
        try:
            fd = os.open(os.path.join(folder, f"{os.getpid()}-failed"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(fd, f"!\tthe tracer did not start in pid {os.getpid()} ({type(exc).__name__})\n".encode())
            os.close(fd)
        except OSError:
            pass


def _chain() -> None:
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.path:
        if os.path.abspath(d or ".") == here:
            continue
        cand = os.path.join(d or ".", "sitecustomize.py")
        if os.path.isfile(cand):
            spec = importlib.util.spec_from_file_location("_next_sitecustomize", cand)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return


_start()
_chain()
