"""Zoo models for the explorer: widgets built from each model's declared options, traces cached."""

from __future__ import annotations

from functools import partial
from typing import Any

import streamlit as st

from remat_core.frontends import LEVELS, build_model, get_spec, list_models, param_count, trace_zoo_model
from remat_core.graph import COST_MODELS

from .session import Model

DEFAULT_ZOO_MODEL = "resnet18"
DEFAULT_ZOO_BATCH = 4
DEFAULT_LEVEL = "module"
DEFAULT_COST = "flops"


@st.cache_resource(show_spinner="Tracing the model…", max_entries=8)
def traced_model(name: str, level: str = DEFAULT_LEVEL, cost: str = DEFAULT_COST,
                 options: tuple[tuple[str, int], ...] = ()) -> Model:
    """Build zoo model ``name`` with ``options`` and trace one training step (FakeTensors: no real memory).

    Raises
    ------
    ZooError, TraceError
        For an unknown model or option, or a model the tracer cannot handle.
    """
    chosen = dict(options)
    graph = trace_zoo_model(name, level=level, cost=cost, **chosen)
    parameters = param_count(build_model(name, device="meta", **chosen).module)
    settings = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in chosen.items())
    return Model(graph, f"zoo: {name} ({settings + ', ' if settings else ''}{level} level, {cost} costs)",
                 parameters, rebuild=partial(trace_zoo_model, name, level=level, cost=cost, **chosen))


def default_zoo_model() -> Model:
    """The model a new session opens on: a ResNet-18, small batch, module level."""
    return traced_model(DEFAULT_ZOO_MODEL, DEFAULT_LEVEL, DEFAULT_COST, (("batch_size", DEFAULT_ZOO_BATCH),))


def zoo_form() -> Model | None:
    """The Model page's zoo picker: a model, its declared options, level and cost model.

    Returns the traced model when the form is submitted, else None.

    Raises
    ------
    ZooError, TraceError
        From :func:`traced_model`.
    """
    names = list_models()
    name = st.selectbox("Model", names, index=names.index(DEFAULT_ZOO_MODEL) if DEFAULT_ZOO_MODEL in names else 0,
                        key="w_zoo_model", format_func=lambda n: f"{n} · {get_spec(n).description}")
    spec = get_spec(name)
    with st.form("zoo_form", border=False):
        columns = st.columns(max(len(spec.options), 1) + 2)
        chosen: dict[str, Any] = {}
        for column, option in zip(columns, spec.options):
            default = DEFAULT_ZOO_BATCH if option.role == "batch" else option.default
            chosen[option.name] = column.number_input(
                option.name.replace("_", " "), min_value=option.minimum, max_value=option.maximum,
                value=min(max(default, option.minimum), option.maximum), step=option.multiple_of,
                help=option.help, key=f"w_zoo_{name}_{option.name}")
        level = columns[-2].selectbox("Level", LEVELS, index=LEVELS.index(DEFAULT_LEVEL), key="w_zoo_level",
                                      help="op: one node per ATen op (what the solvers do best on); module: one "
                                           "node per module call per pass (readable for big models).")
        cost = columns[-1].selectbox("Cost model", COST_MODELS, index=COST_MODELS.index(DEFAULT_COST),
                                     key="w_zoo_cost", help="flops, unit (every op 1), bytes moved, or measured "
                                                            "CPU time.")
        st.caption(f"{spec.reference_params:,} parameters at the default options ({spec.reference}).")
        if not st.form_submit_button("Trace this model", type="primary"):
            return None
    return traced_model(name, level, cost, tuple(sorted((k, int(v)) for k, v in chosen.items())))
