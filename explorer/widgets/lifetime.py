"""The lifetime chart's row controls: all or recomputed tensors, one module, how many rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


from .rows import wrapping_row

LIFETIME_ROWS = 60
"""Rows the lifetime chart shows until the user asks for more."""
MAX_LIFETIME_ROWS = 500
LIFETIME_SHOW = {"all": "All tensors", "recomputed": "Recomputed only"}


@dataclass(frozen=True)
class LifetimeChoice:
    """Which rows the lifetime chart shows (see :func:`remat_core.viz.timeline.lifetime_candidates`)."""

    max_rows: int
    recomputed_only: bool
    module: str | None


def lifetime_controls(modules: Sequence[str]) -> LifetimeChoice:
    """The lifetime chart's row controls: all or recomputed tensors, a module to look inside, how many rows."""
    controls = wrapping_row()
    picked = controls.segmented_control("Rows", list(LIFETIME_SHOW), format_func=LIFETIME_SHOW.get, default="all",
                                        required=True, key="w_lifetime_show", width="content")
    module = controls.selectbox("Module", modules, index=None, placeholder="every module" if modules else
                                "this graph has no module paths", disabled=not modules, key="w_lifetime_module",
                                help="Only the tensors of this module (and the modules inside it).", width=260)
    rows = controls.number_input("At most", min_value=10, max_value=MAX_LIFETIME_ROWS, value=LIFETIME_ROWS, step=10,
                                 key="w_lifetime_rows", help="Rows drawn: recomputed tensors first, then the largest.",
                                 width=130)
    return LifetimeChoice(int(rows), picked == "recomputed", module)
