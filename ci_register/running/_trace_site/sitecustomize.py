"""Starts the executed-functions tracer of a traced suite run in every Python process.

``ci_register.running.executed.begin`` puts this folder first on ``PYTHONPATH`` with
``CI_REGISTER_EXECUTED_DIR``; Python imports ``sitecustomize`` at start-up, before the
program's own code, so pytest, a test's server and its workers are traced from their first
line. The tracer's module is loaded by path (importing the ``ci_register`` package here
would run its code before the tracer starts).

Then the program's own ``sitecustomize`` (a module or a package further along ``sys.path``)
runs *as* ``sitecustomize``: it replaces this module in ``sys.modules``, so ``import
sitecustomize`` gives the program its own module, as it would without the tracer. Another
copy of this folder on the path (an older checkout's runner puts its own first) is passed
over: one tracer a process, and no copy hands over to another.
"""

import os
import sys

_MARK = "_trace_site"  # the folder name every copy of this module lives in


def _start() -> None:
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.environ.get("CI_REGISTER_EXECUTED_DIR")
    if not folder or "_ci_register_executed" in sys.modules:  # off, or another copy already traces
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


def _hand_over() -> None:
    """Run the program's own ``sitecustomize`` in this module's place (site.py reports an
    error in it as it would have: the exception goes up to site's import)."""
    import importlib.machinery
    import importlib.util

    path = [d for d in sys.path if os.path.basename(os.path.abspath(d or ".")) != _MARK]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod  # the import that ran this file returns what sys.modules holds
    spec.loader.exec_module(mod)


_start()
_hand_over()
