"""A progress line on stderr for planning that takes a while: which phase it is in, the best plan so far, the time
left. Quiet for the first :data:`QUIET_SECONDS`, so that quick plans print nothing."""

from __future__ import annotations

import sys
import threading
import time
from typing import IO

QUIET_SECONDS = 2.0
"""Planning shorter than this prints nothing."""
EVERY_SECONDS = 1.0


class PlanningProgress:
    """``with PlanningProgress("hf-llama", limit=10) as progress: progress.phase("solving with sac-planner")``.

    A background thread writes ``planning NAME: PHASE · BEST · 3 s, at most 7 s left`` once planning has run
    :data:`QUIET_SECONDS`, rewriting the line in place on a terminal (a new line every few seconds elsewhere), and
    ends it when the block exits.
    """

    def __init__(self, name: str, limit: float | None = None, stream: IO[str] | None = None):
        self.name, self.limit = name, limit
        self.stream = stream if stream is not None else sys.stderr
        self.current, self.best = "starting", ""
        self._started = time.monotonic()
        self._done = threading.Event()
        self._printed = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="planning-progress")

    def __enter__(self) -> "PlanningProgress":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join(timeout=2)
        if self._printed:
            self._write(f"planned {self.name} in {time.monotonic() - self._started:.1f} s", final=True)

    def phase(self, text: str) -> None:
        """What planning does now (``"tracing"``, ``"solving with auto"``)."""
        self.current = text

    def best_so_far(self, text: str) -> None:
        """The best plan found yet, in words (``"87.6 MiB at +15% time"``)."""
        self.best = text

    def line(self) -> str:
        elapsed = time.monotonic() - self._started
        left = f", at most {max(self.limit - elapsed, 0):.0f} s left" if self.limit is not None else ""
        best = f" · best so far {self.best}" if self.best else ""
        return f"planning {self.name}: {self.current}{best} · {elapsed:.0f} s{left}"

    def _run(self) -> None:
        if self._done.wait(QUIET_SECONDS):
            return
        last = 0.0
        while not self._done.is_set():
            if self._terminal() or time.monotonic() - last >= 5 * EVERY_SECONDS:
                self._write(self.line())
                last = time.monotonic()
            self._done.wait(EVERY_SECONDS)

    def _terminal(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def _write(self, text: str, final: bool = False) -> None:
        """On a terminal the line is rewritten in place (and ended when ``final``); elsewhere each is a new line."""
        try:
            self.stream.write(f"\r{text}\033[K" + ("\n" if final else "") if self._terminal() else text + "\n")
            self.stream.flush()
            self._printed = True
        except (OSError, ValueError):  # a closed stream: nothing to tell
            pass
