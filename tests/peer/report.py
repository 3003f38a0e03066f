"""The pass/fail report of the drop-in's peer scripts: one line per check, a last line, and
the exit status."""
import sys

failures = []


def check(condition, what):
    """Prints `what` as passed or failed; failures are counted for `finish`."""
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def finish():
    """Prints the summary and exits 1 when a check failed."""
    print("all passed" if not failures else f"{len(failures)} failed")
    sys.exit(1 if failures else 0)
