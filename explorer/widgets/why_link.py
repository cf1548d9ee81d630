"""Links to the Why page on one tensor: ``/why?model=M&budget=B&solver=S&tensor=LABEL``.

Every place that lists a recomputed tensor links there (:func:`why_url`). The tensor is named by its
label (the Why page reads a label or an id), the budget by bytes with the largest binary unit that
keeps it exact (``14.5MiB``), the model by what :func:`model_param` says.
"""

from __future__ import annotations

from decimal import Decimal

from remat_core import ComputeGraph
from remat_core.graph import node_label

from ..state import Model
from ..state.links import page_link

EXACT_DIGITS = 6
"""A budget written with a unit keeps at most this many decimals; else it is written in bytes."""
_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def budget_param(nbytes: int) -> str:
    """``15204352`` -> ``'14.5MiB'``: the largest binary unit that writes the budget exactly, else bytes."""
    for name, size in _UNITS:
        if nbytes >= size:
            text = format(Decimal(int(nbytes)) / Decimal(size), "f").rstrip("0").rstrip(".")
            if len(text.partition(".")[2]) <= EXACT_DIGITS:
                return f"{text}{name}"
    return f"{int(nbytes)}B"


def model_param(model: Model) -> str:
    """The ``model`` URL value of a model: a zoo model's name, an upload's content hash, else the graph's name."""
    if model.origin.startswith("zoo: "):
        return model.origin.removeprefix("zoo: ").split(" ", 1)[0]
    if model.origin.startswith("uploaded: "):
        return model.graph.content_hash
    return model.graph.name


def level_param(model: Model) -> str | None:
    """``op`` or ``module`` for a traced model (its origin says which), else None."""
    for level in ("module", "op"):
        if f"{level} level" in model.origin:
            return level
    return None


def why_url(model: Model, solver: str, budget: int, tensor: str, graph: ComputeGraph | None = None) -> str:
    """The Why page on ``tensor`` (an id of ``graph``, default the model's) under ``solver`` at ``budget`` bytes."""
    named = node_label(graph if graph is not None else model.graph, tensor)
    return page_link("why", model=model_param(model), level=level_param(model), solver=solver,
                     budget=budget_param(budget), tensor=named)
