"""Zoo models for the explorer: widgets built from each model's declared options, traces cached, and the
name a link gives them: ``resnet18`` at the zoo's default options, ``resnet18:batch_size=4,cost=unit`` with
the options (and the cost model) that differ from them. The level is the link's ``level``."""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping

import streamlit as st

from remat_core import GraphError
from remat_core.frontends import LEVELS, build_model, get_spec, list_models, param_count, trace_zoo_model
from remat_core.graph import COST_MODELS

from .links import source_settings
from .session import MODEL, Model

DEFAULT_ZOO_MODEL = "resnet18"
DEFAULT_SESSION_OPTIONS = {"batch_size": 4}
"""A new session's model is ResNet-18 at batch 4, not the zoo's 32: a step on real tensors (the Timeline's run)
takes seconds on a CPU. Links and the Model page's form use the zoo's options, as ``trace`` does."""
DEFAULT_LEVEL = "module"
DEFAULT_COST = "flops"
COST_SETTING = "cost"
"""The setting of a zoo link that names the cost model (the others are the model's declared options)."""


@st.cache_resource(show_spinner="Tracing the model…", max_entries=8)
def traced_model(name: str, level: str = DEFAULT_LEVEL, cost: str = DEFAULT_COST,
                 options: tuple[tuple[str, int], ...] = ()) -> Model:
    """Build zoo model ``name`` with ``options`` (every declared option, see :func:`zoo_model`) and trace one
    training step (FakeTensors: no real memory).

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
                 parameters, rebuild=partial(trace_zoo_model, name, level=level, cost=cost, **chosen),
                 source=zoo_source(name, chosen, cost), level=level)


def zoo_model(name: str, level: str = DEFAULT_LEVEL, cost: str = DEFAULT_COST,
              chosen: Mapping[str, Any] | None = None) -> Model:
    """Zoo model ``name`` traced with ``chosen`` options (the zoo's defaults for the rest), cached.

    Raises
    ------
    ZooError, TraceError
        For an unknown model, an option it does not declare or out of range, or a model the tracer cannot handle.
    """
    options = get_spec(name).resolve(dict(chosen or {}))
    return traced_model(name, level, cost, tuple(sorted(options.items())))


def default_zoo_model() -> Model:
    """The model a new session opens on: a ResNet-18 at batch 4 (:data:`DEFAULT_SESSION_OPTIONS`), module level;
    its link says so (``resnet18:batch_size=4``)."""
    return zoo_model(DEFAULT_ZOO_MODEL, chosen=DEFAULT_SESSION_OPTIONS)


def form_start(name: str) -> dict[str, int]:
    """Where the Model page's form for zoo model ``name`` starts: the loaded model's options when it is that zoo
    model (the form shows what the pages show), else the zoo's defaults (what ``trace`` and a link use)."""
    options = dict(get_spec(name).defaults)
    current = st.session_state.get(MODEL)
    family, settings = source_settings(current.source) if current is not None and current.source else ("", {})
    if family == name:
        options.update({key: int(value) for key, value in settings.items() if key in options and value.isdigit()})
    return options


def zoo_source(name: str, options: Mapping[str, int], cost: str) -> str:
    """The name a link gives this zoo model: ``name``, then ``:option=value,...`` for what differs from the
    zoo's defaults (the cost model as ``cost=``)."""
    defaults = get_spec(name).defaults
    changed = [f"{k}={v}" for k, v in sorted(options.items()) if defaults.get(k) != v]
    if cost != DEFAULT_COST:
        changed.append(f"{COST_SETTING}={cost}")
    return name + (":" + ",".join(changed) if changed else "")


def is_zoo_name(name: str) -> bool:
    return name in list_models()


def zoo_model_from_link(name: str, settings: Mapping[str, str], level: str | None) -> Model:
    """The zoo model a link names: ``name`` with ``settings`` (option values and ``cost``) at ``level``.

    Raises
    ------
    GraphError
        For a setting that is no integer, an unknown cost model or level; ZooError and TraceError as
        :func:`zoo_model`.
    """
    chosen: dict[str, int] = {}
    cost = DEFAULT_COST
    for key, value in settings.items():
        if key == COST_SETTING:
            if value not in COST_MODELS:
                raise GraphError(f"{name}: unknown cost model {value!r}; use one of {', '.join(COST_MODELS)}")
            cost = value
        elif not value.isdigit():
            raise GraphError(f"{name}: option {key}={value!r} is not a whole number")
        else:
            chosen[key] = int(value)
    if level is not None and level not in LEVELS:
        raise GraphError(f"unknown level {level!r}; use one of {', '.join(LEVELS)}")
    return zoo_model(name, level or DEFAULT_LEVEL, cost, chosen)


def zoo_form() -> Model | None:
    """The Model page's zoo picker: a model, its declared options, level and cost model.

    The form opens on the loaded model when it is a zoo model (its options, level and cost model), else on
    the default model at the zoo's options. Returns the traced model when the form is submitted, else None.

    Raises
    ------
    ZooError, TraceError
        From :func:`zoo_model`.
    """
    names = list_models()
    current = st.session_state.get(MODEL)
    loaded = source_settings(current.source)[0] if current is not None and current.source else ""
    first = loaded if loaded in names else DEFAULT_ZOO_MODEL  # the form opens on the loaded zoo model
    name = st.selectbox("Model", names, index=names.index(first) if first in names else 0,
                        key="w_zoo_model", format_func=lambda n: f"{n} · {get_spec(n).description}")
    spec = get_spec(name)
    defaults = form_start(name)
    with st.form("zoo_form", border=False):
        columns = st.columns(max(len(spec.options), 1) + 2)
        chosen: dict[str, Any] = {}
        for column, option in zip(columns, spec.options):
            chosen[option.name] = column.number_input(
                option.name.replace("_", " "), min_value=option.minimum, max_value=option.maximum,
                value=min(max(defaults[option.name], option.minimum), option.maximum), step=option.multiple_of,
                help=option.help, key=f"w_zoo_{name}_{option.name}")
        level_now = current.level if current is not None and loaded == name and current.level in LEVELS else None
        level = columns[-2].selectbox("Level", LEVELS, index=LEVELS.index(level_now or DEFAULT_LEVEL),
                                      key="w_zoo_level",
                                      help="op: one node per ATen op (what the solvers do best on); module: one "
                                           "node per module call per pass (readable for big models).")
        cost_now = source_settings(current.source)[1].get(COST_SETTING) if loaded == name else None
        cost = columns[-1].selectbox("Cost model", COST_MODELS,
                                     index=COST_MODELS.index(cost_now if cost_now in COST_MODELS else DEFAULT_COST),
                                     key="w_zoo_cost", help="flops, unit (every op 1), bytes moved, or measured "
                                                            "CPU time.")
        st.caption(f"{spec.reference_params:,} parameters at the default options ({spec.reference}).")
        if not st.form_submit_button("Trace this model", type="primary"):
            return None
    return zoo_model(name, level, cost, {k: int(v) for k, v in chosen.items()})
