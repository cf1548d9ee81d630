"""Job functions for the job machinery's tests: module-level, so that a lane's worker process can import them."""

from __future__ import annotations

import os
import time


def add(report, graph, a, b):
    return a + b


def node_count(report, graph):
    return len(graph)


def counted_steps(report, graph, n):
    """Report each of ``n`` steps and its result as a partial one."""
    for i in range(n):
        report.step(i, n, f"step {i + 1}")
        report.partial(i * i)
    return n


def forever(report, graph):
    """Never returns: only Cancel or a time limit ends it."""
    report.step(0, 1, "waiting forever")
    while True:
        time.sleep(0.01)


def broken(report, graph):
    raise ValueError("broken on purpose")


def dies(report, graph):
    os._exit(3)
