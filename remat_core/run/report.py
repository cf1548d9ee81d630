"""What a training step run with a plan reports: the fields of ``execute --via ... --json``.

Kept free of PyTorch, so that the command line can read a report without loading it;
:mod:`remat_core.run.step` runs the step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ..schedule.sac_program import Uncontrolled


PEAK_TOLERANCE = 0.10
"""How far the measured peak of ``plan`` and ``sac`` may be from the simulated one before the report says so."""

BUDGET_SLACK = 0.05
"""How far over its budget a step may hold (the weights and inputs included) before ``execute`` warns: the budget
is a promise to the user, kept to within the meter's and the kernels' own variation."""


@dataclass(frozen=True)
class StepReport:
    """One training step run with a plan, and the same step in eager PyTorch.

    Attributes
    ----------
    via : str
    gradients_equal : bool or None
        Within ``tolerance`` x the largest reference gradient; None when not comparable.
    max_grad_diff : float or None
        Largest absolute difference from the reference gradients.
    reference : str
        What the gradients were compared with.
    measured_peak, simulated_peak, eager_peak : int
        Bytes above the weights and inputs: this step's, the schedule's as simulated (for ``sac``, of
        what SAC does with it: its regions recompute in one run), the eager step's.
    step_seconds, eager_step_seconds : float
        The fastest of the timed runs of the step with the plan, and of the eager step.
    predicted_overhead : float
        The time the plan adds, as a share of the eager step: what the route's simulated schedule computes beyond
        checkpoint-all, priced at the rate the model's own forward runs at (its measured time over its ops'
        costs, so a re-run forward pays its Python too), plus SAC's per-op policy
        (:func:`~remat_core.run.step.predicted_overhead`).
    predicted_step_seconds : float
        The eager step's measured time with that overhead: what the step should take.
    peak_measure : str
        What measured the peaks.
    device : str
    uncontrolled : tuple of Uncontrolled
        What the route could not do as planned (it saved those tensors instead).
    notes : tuple of str
        Anything else a reader of the numbers should know (a peak more than 10% off, and why).
    details : mapping
        Route-specific figures (regions, knapsack calls, the executor's own byte count).
    """

    via: str
    gradients_equal: bool | None
    max_grad_diff: float | None
    max_gradient: float
    tolerance: float
    reference: str
    measured_peak: int
    simulated_peak: int
    eager_peak: int
    step_seconds: float
    eager_step_seconds: float
    predicted_overhead: float
    predicted_step_seconds: float
    peak_measure: str
    device: str
    uncontrolled: tuple[Uncontrolled, ...] = ()
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def uncontrolled_bytes(self) -> int:
        return sum(u.bytes for u in self.uncontrolled)

    def summary(self) -> dict[str, Any]:
        """Every field as plain JSON values."""
        doc = asdict(self)
        doc["uncontrolled"] = [u.summary() for u in self.uncontrolled]
        doc["uncontrolled_bytes"] = self.uncontrolled_bytes
        doc["notes"] = list(self.notes)
        doc["details"] = dict(self.details)
        return doc


