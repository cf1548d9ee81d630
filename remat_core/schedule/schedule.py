"""Schedules: an ordered list of ``("compute", id)``, ``("free", id)``, ``("offload", id)`` and ``("prefetch", id)`` ops.

``offload`` copies a device tensor to host memory on the transfer lane, ``prefetch`` brings a host copy
back; both need a :class:`~remat_core.schedule.simulator.Link` when simulated. A schedule of compute
and free ops alone is what every schedule was before transfers (and simulates exactly as before).

A schedule is plain data. Whoever made it, :func:`remat_core.schedule.simulator.simulate` judges it, and
:func:`remat_core.solve` attaches the measured ``stats``. Each op may carry a reason (why the solver
chose it) in the parallel ``reasons`` list: ``None`` or a JSON object with a human-readable
``"text"`` and optional structured fields (``"rule"``, ``"consumer"``, ``"bag"``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from ..errors import ScheduleFormatError

if TYPE_CHECKING:
    from .simulator import SimulationResult

SCHEDULE_FORMAT = "remat-schedule"
SCHEDULE_FORMAT_VERSION = 1
COMPUTE = "compute"
FREE = "free"
OFFLOAD = "offload"
PREFETCH = "prefetch"
ACTIONS = (COMPUTE, FREE, OFFLOAD, PREFETCH)
TRANSFERS = (OFFLOAD, PREFETCH)

Op = tuple[str, str]
Reason = dict[str, Any]


def reason(text: str, **fields: Any) -> Reason:
    """A reason for one op: a sentence for people plus structured fields for the app."""
    return {"text": text, **{k: v for k, v in fields.items() if v is not None}}


@dataclass(frozen=True)
class Schedule:
    """An ordered list of ops and what is known about them.

    Parameters
    ----------
    ops : sequence of (str, str)
        ``(action, node_id)``, the action one of :data:`ACTIONS`.
    reasons : sequence of dict or None, optional
        Parallel to ``ops``: why each op was chosen (None where there is nothing to say).
    graph, solver : str
        Names of the graph and of the solver that made it.
    budget : int or None
        The memory budget it was made for, in bytes.
    stats : mapping
        Measured by the simulator (peak, cost, computes, ...); filled by :func:`remat_core.solve`.
    solver_info : mapping
        What the solver knows that the simulator cannot measure (a MIP gap, a lower bound...).
    simulation : SimulationResult or None
        The full simulation behind ``stats`` (not serialised).
    """

    ops: tuple[Op, ...]
    reasons: tuple[Reason | None, ...] | None = None
    graph: str = ""
    solver: str = ""
    budget: int | None = None
    stats: Mapping[str, Any] = field(default_factory=dict)
    solver_info: Mapping[str, Any] = field(default_factory=dict)
    simulation: "SimulationResult | None" = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple((str(a), str(n)) for a, n in self.ops))
        if self.reasons is not None:
            reasons = tuple(self.reasons)
            if len(reasons) != len(self.ops):
                raise ScheduleFormatError(f"reasons has {len(reasons)} entries but there are {len(self.ops)} ops; "
                                          f"they must be parallel lists")
            object.__setattr__(self, "reasons", reasons)

    def __len__(self) -> int:
        return len(self.ops)

    @property
    def has_transfers(self) -> bool:
        """Whether it copies tensors to the host and back (offload and prefetch ops): it needs a link to be timed."""
        return any(action in TRANSFERS for action, _ in self.ops)

    def reason_at(self, step: int) -> Reason | None:
        """The reason recorded for op ``step``, if any."""
        return self.reasons[step] if self.reasons is not None else None

    def with_updates(self, **changes: Any) -> "Schedule":
        """A copy with some fields replaced."""
        return replace(self, **changes)

    @classmethod
    def from_ops(cls, ops: Iterable[Op], reasons: Sequence[Reason | None] | None = None, **kwargs: Any) -> "Schedule":
        """Build from any iterable of ops (and optional parallel reasons)."""
        ops = tuple(ops)
        if reasons is not None and all(r is None for r in reasons):
            reasons = None
        return cls(ops=ops, reasons=tuple(reasons) if reasons is not None else None, **kwargs)

    # -- serialisation --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The schedule as a ``remat-schedule`` v1 document."""
        doc: dict[str, Any] = {"format": SCHEDULE_FORMAT, "version": SCHEDULE_FORMAT_VERSION,
                               "graph": self.graph, "solver": self.solver, "budget": self.budget,
                               "ops": [list(op) for op in self.ops], "stats": dict(self.stats)}
        if self.solver_info:
            doc["solver_info"] = dict(self.solver_info)
        if self.reasons is not None:
            doc["reasons"] = list(self.reasons)
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "Schedule":
        """Read a ``remat-schedule`` v1 document.

        Raises
        ------
        ScheduleFormatError
            When the document is not a schedule or an op is malformed.
        """
        if not isinstance(doc, Mapping):
            raise ScheduleFormatError(f"a remat-schedule document must be a JSON object, got {type(doc).__name__}")
        if doc.get("format") != SCHEDULE_FORMAT:
            raise ScheduleFormatError(f"not a remat-schedule document: expected \"format\": \"{SCHEDULE_FORMAT}\", "
                                      f"got {doc.get('format')!r}")
        if doc.get("version") != SCHEDULE_FORMAT_VERSION:
            raise ScheduleFormatError(f"unsupported remat-schedule version {doc.get('version')!r}; this tool reads "
                                      f"version {SCHEDULE_FORMAT_VERSION}")
        raw_ops = doc.get("ops")
        if not isinstance(raw_ops, list):
            raise ScheduleFormatError("remat-schedule: \"ops\" must be a list of [action, node] pairs")
        ops = []
        for i, op in enumerate(raw_ops):
            if not (isinstance(op, list) and len(op) == 2 and all(isinstance(x, str) for x in op)):
                raise ScheduleFormatError(f"op #{i} is {op!r}; an op is [action, node id], the action one of "
                                          f"{', '.join(ACTIONS)}")
            ops.append((op[0], op[1]))
        budget = doc.get("budget")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
            raise ScheduleFormatError(f"remat-schedule: \"budget\" must be a non-negative integer (bytes) or null, "
                                      f"got {budget!r}")
        reasons = doc.get("reasons")
        if reasons is not None:
            if not isinstance(reasons, list) or not all(r is None or isinstance(r, Mapping) for r in reasons):
                raise ScheduleFormatError("remat-schedule: \"reasons\" must be a list of objects or nulls, one per op")
            reasons = tuple(dict(r) if r is not None else None for r in reasons)
        return cls(ops=tuple(ops), reasons=reasons, graph=str(doc.get("graph", "")),
                   solver=str(doc.get("solver", "")), budget=budget, stats=_object_field(doc, "stats"),
                   solver_info=_object_field(doc, "solver_info"))


def _object_field(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``doc[key]`` as a dict: a JSON object, or ``{}`` when absent or null; anything else is refused."""
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ScheduleFormatError(f"remat-schedule: \"{key}\" must be a JSON object of names to values, or absent; "
                                  f"got a {type(value).__name__}")
    return dict(value)
