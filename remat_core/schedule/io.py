"""Reading and writing ``remat-schedule`` v1 files (the schedule's JSON is :meth:`Schedule.to_json`)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ScheduleFormatError
from ..graph import parse_json_text
from .schedule import Schedule


def load_schedule(path: str | Path) -> Schedule:
    """Read a ``remat-schedule`` v1 file.

    Raises
    ------
    ScheduleFormatError
        For a missing file, malformed JSON or a document that is not a schedule.
    """
    path = Path(path)
    if not path.is_file():
        raise ScheduleFormatError(f"schedule file not found: {path}")
    doc = parse_json_text(path.read_bytes(), path.name, ScheduleFormatError)
    try:
        return Schedule.from_json(doc)
    except ScheduleFormatError as e:
        raise ScheduleFormatError(f"{path.name}: {e}") from None


def save_schedule(schedule: Schedule, path: str | Path) -> None:
    """Write ``schedule`` as ``remat-schedule`` v1 JSON."""
    Path(path).write_text(json.dumps(schedule.to_json()) + "\n")
