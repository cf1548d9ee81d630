"""The Learn page's lesson: its examples, the recursion it steps through, and the one step value every
control drives.

The lesson runs on a built-in example (a chain, a small residual net, a U-Net-like graph, each at a
size the learner picks) or on one module of the loaded model. Walk-throughs are built once per
(graph, solver, budget) and kept (:func:`lesson_walk`); the step is one integer in the session
(:data:`STEP`), which Play, the buttons, the slider and clicks on the figures all set.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable
from urllib.parse import urlencode

import streamlit as st

from remat_core import ComputeGraph
from remat_core.analysis import RecursionWalk, module_subgraph, recursion_walk
from remat_core.graph import training_chain
from remat_core.graph.generators import residual_training_net, unet_training_graph
from remat_core.solvers import find_solvers, trace_recursion

from ..safety import callback
from .url import followed, remember

if TYPE_CHECKING:
    from ..figures.lesson import WalkFigures

STEP = "learn_step"
"""The step shown, 0-based: the one value Play, Previous/Next, the slider and figure clicks set."""
STEP_SLIDER = "w_learn_step"
"""The step slider's key prefix: one slider per step shown (:func:`slider_key`), drawn at that step."""
PLAYING = "learn_playing"
SPEED = "w_learn_speed"
"""The speed picker's key (steps per second)."""
TIMER = "learn_timer"
"""(playing, speed) when the page last set the step fragment's timer."""
LAST_TICK = "learn_last_tick"
PICKED_TENSOR = "learn_tensor"
"""A tensor clicked on the graph: the page lists the calls that compute it."""
CHART_GENERATION = "learn_chart_generation"
"""Bumped after a click on a figure was handled: the figures get new keys, which clears their selection."""
WALK = "learn_walk"
"""Which walk-through :data:`STEP` counts in; a new one starts at step 0."""
SPEEDS = (0.5, 1.0, 2.0, 4.0)
"""Play speeds, in steps per second."""

MAX_LESSON_NODES = 160
"""Computed nodes a lesson graph may have: beyond, a step-by-step lesson has thousands of steps."""
MAX_LESSON_COMPUTES = 6_000
"""Compute ops a traced recursion may emit before the lesson refuses it (the recursion grows like n^log k)."""

MODULE_EXAMPLE = "module"
DEFAULT_RECURSION = "treewidth"
"""The recursion a lesson opens on: the paper's first (TW-Remat)."""
RECURSIONS = tuple(sorted((spec.name for spec in find_solvers(traceable_recursion=True)),
                          key=lambda name: name != DEFAULT_RECURSION))
"""The solvers whose recursion a lesson can trace (the registry's tag), the default first."""
MEMORY_MODES = ("pure", "budget")

LESSON_PARAMS = ("example", "size", "recursion", "memory", "step")
"""The Learn page's own URL parameters: the lesson's example, size, recursion, memory mode and step (1-based).
The page writes them as the lesson moves (:func:`publish_lesson`; not while it plays) and follows them when
the URL shows a lesson this session did not write (a link, a reload of another's link, Back)."""
LESSON_WRITTEN = "learn_url_written"
"""The lesson parameters this session wrote or followed last (:func:`explorer.state.url.remember`), by the
explorer's own rules for its URL parameters."""
URL_STEP = "learn_url_step"


@dataclass(frozen=True)
class Example:
    """A built-in lesson graph: what it is, its size knob and how to build it."""

    title: str
    about: str
    size_name: str
    default: int
    low: int
    high: int
    build: Callable[[int], ComputeGraph]


EXAMPLES = {
    "chain": Example("A chain", "the training graph of a chain of layers: each gradient reads the activation that "
                     "entered its layer, so checkpoint-all keeps every activation until the backward pass reaches "
                     "it", "layers", 12, 1, 40, lambda n: training_chain(n, mem=2**20, name=f"chain-{n}")),
    "residual": Example("A small residual net", "a stem, residual blocks (conv, relu, conv, add the block's input) and "
                        "a head, with its backward pass: the skip connections make the graph wider than a chain",
                        "blocks", 3, 1, 8, lambda n: residual_training_net(n, mem=2**20)),
    "unet": Example("A U-Net-like graph", "an encoder that halves the resolution, a decoder that doubles it and "
                    "concatenates the encoder's output of the same level: long skip connections, the widest of "
                    "the three", "levels", 2, 1, 4, lambda n: unet_training_graph(n, mem=4 * 2**20)),
}


@st.cache_resource(show_spinner=False, max_entries=24)
def example_graph(kind: str, size: int) -> ComputeGraph:
    """A built-in example at a size (cached: the same object each run, so walks and figures are reused)."""
    return EXAMPLES[kind].build(size)


@st.cache_resource(show_spinner=False, max_entries=8)
def module_graph(graph_key: str, _graph: ComputeGraph, module: str) -> ComputeGraph:
    """One module of the loaded model as a graph of its own (see :func:`remat_core.analysis.module_subgraph`).

    Raises
    ------
    GraphError
        For a module that computes nothing.
    """
    del graph_key
    return module_subgraph(_graph, module)


def too_big(graph: ComputeGraph) -> str | None:
    """Why ``graph`` is too big for a step-by-step lesson, or None."""
    computed = sum(1 for n in graph.nodes if not n.pinned)
    if computed > MAX_LESSON_NODES:
        return (f"it computes {computed:,} tensors; a lesson steps through at most {MAX_LESSON_NODES} (pick a "
                f"smaller module, or a built-in example)")
    return None


@st.cache_resource(show_spinner="Tracing the recursion…", max_entries=32)
def lesson_walk(graph_key: str, _graph: ComputeGraph, solver: str, budget: int | None) -> RecursionWalk:
    """The recursion of ``solver`` on the graph, call by call, simulated.

    Raises
    ------
    SolverLimitExceeded
        When the recursion passes :data:`MAX_LESSON_COMPUTES` computes (too long to step through).
    """
    del graph_key
    return recursion_walk(_graph, trace_recursion(_graph, solver, budget, max_computes=MAX_LESSON_COMPUTES))


# -- the one step value ------------------------------------------------------------------------------

def size_key(kind: str) -> str:
    """The size picker's key of a built-in example."""
    return f"w_learn_size_{kind}"


def open_lesson() -> list[str]:
    """Set the lesson's pickers: from the URL's :data:`LESSON_PARAMS` once per session, else their defaults
    (the chain, at its default size, TW-Remat as the paper states it). Returns what the URL said that could
    not be read (the page says so and keeps the defaults for those)."""
    given = {k: st.query_params[k] for k in LESSON_PARAMS if k in st.query_params}
    wrong = _from_url(given) if followed(given, LESSON_WRITTEN) else []
    state = st.session_state
    state.setdefault("w_learn_example", "chain")
    for kind, example in EXAMPLES.items():
        state.setdefault(size_key(kind), example.default)
    state.setdefault("w_learn_recursion", RECURSIONS[0])
    state.setdefault("w_learn_mode", MEMORY_MODES[0])
    return wrong


def _from_url(given: dict[str, str]) -> list[str]:
    state = st.session_state
    remember(given, LESSON_WRITTEN)
    wrong = []
    example = given.get("example")
    if example is not None:
        if example in EXAMPLES or example == MODULE_EXAMPLE:
            state["w_learn_example"] = example
        else:
            wrong.append(f"example={example} (one of {', '.join([*EXAMPLES, MODULE_EXAMPLE])})")
    kind = state.get("w_learn_example", "chain")
    if "size" in given and kind in EXAMPLES:
        spec = EXAMPLES[kind]
        if given["size"].isdigit() and spec.low <= int(given["size"]) <= spec.high:
            state[size_key(kind)] = int(given["size"])
        else:
            wrong.append(f"size={given['size']} ({spec.size_name} from {spec.low} to {spec.high})")
    for name, key, allowed in (("recursion", "w_learn_recursion", RECURSIONS), ("memory", "w_learn_mode",
                                                                                  MEMORY_MODES)):
        if name in given:
            if given[name] in allowed:
                state[key] = given[name]
            else:
                wrong.append(f"{name}={given[name]} (one of {', '.join(allowed)})")
    if "step" in given:
        if given["step"].isdigit() and int(given["step"]) >= 1:
            state[URL_STEP] = int(given["step"]) - 1
            state[STEP] = int(given["step"]) - 1  # the walk shown already: go there (a new one starts there)
            state[PLAYING] = False
        else:
            wrong.append(f"step={given['step']} (a step number from 1)")
    return wrong


def lesson_params(kind: str, size: int | None, recursion: str, memory: str, step: int) -> dict[str, str]:
    """The URL parameters of this lesson state (``step`` 0-based; ``size`` None for a module)."""
    params = {"example": kind, "size": size, "recursion": recursion, "memory": memory, "step": step + 1}
    return {k: str(v) for k, v in params.items() if v is not None}


def lesson_url(kind: str, size: int | None, recursion: str, memory: str, step: int) -> str:
    """A link that opens the Learn page on this lesson state (``step`` 0-based; ``size`` None for a module)."""
    return "/learn?" + urlencode(lesson_params(kind, size, recursion, memory, step))


def publish_lesson(kind: str, size: int | None, recursion: str, memory: str, step: int) -> None:
    """Write the lesson's state into the URL beside the explorer's own parameters (a reload or a shared link
    opens the same step), unless it plays: a step a second would fill the browser's history."""
    if playing():
        return
    wanted = lesson_params(kind, size, recursion, memory, step)
    remember(wanted, LESSON_WRITTEN)
    if {k: st.query_params[k] for k in LESSON_PARAMS if k in st.query_params} != wanted:
        for name in LESSON_PARAMS:
            if name in wanted:
                st.query_params[name] = wanted[name]
            elif name in st.query_params:
                del st.query_params[name]


def start_walk(identity: tuple, steps: int) -> int:
    """The step to show of the walk named ``identity`` (a new walk starts at 0, or at the step a link named),
    clamped to its ``steps``."""
    state = st.session_state
    if state.get(WALK) != identity:
        state[WALK] = identity
        state[STEP] = state.pop(URL_STEP, 0)
        state[PLAYING] = False
        state.pop(PICKED_TENSOR, None)
    state[STEP] = max(0, min(int(state.get(STEP, 0)), steps - 1))
    return state[STEP]


@callback
def go_to(step: int, steps: int, pause: bool = True) -> None:
    """Show ``step`` (clamped); a manual move pauses Play."""
    st.session_state[STEP] = max(0, min(int(step), steps - 1))
    if pause:
        st.session_state[PLAYING] = False


@callback
def step_by(delta: int, steps: int) -> None:
    """Move ``delta`` steps from the step shown (Previous, Next): clicks sent faster than the page answers
    each move one step."""
    go_to(int(st.session_state.get(STEP, 0)) + delta, steps)


def slider_key(step: int) -> str:
    """The key of the slider drawn at ``step``. A new slider per step: a value the browser still reports for a
    slider drawn at an earlier step (a rerun racing a click) belongs to no slider on the page and moves nothing."""
    return f"{STEP_SLIDER}_{step}"


@callback
def slider_moved(drawn_at: int) -> None:
    """The callback of the slider drawn at step ``drawn_at``: its 1-based value becomes the step, unless another
    control has moved the step since that slider was drawn (then the value is stale)."""
    state = st.session_state
    if state.get(STEP) == drawn_at:
        state[STEP] = int(state[slider_key(drawn_at)]) - 1
        state[PLAYING] = False


def playing() -> bool:
    return bool(st.session_state.get(PLAYING))


def play_interval() -> float:
    """Seconds between two steps at the chosen speed."""
    return 1.0 / float(st.session_state.get(SPEED) or 1.0)


def timer() -> float | None:
    """The step fragment's timer for this run of the page (seconds between runs; None when paused), noted
    so that :func:`timer_changed` can tell when Play, Pause or the speed needs it set again."""
    st.session_state[TIMER] = (playing(), play_interval())
    return play_interval() if playing() else None


def timer_changed() -> bool:
    """Whether Play, Pause or the speed changed since the page set the step fragment's timer."""
    return st.session_state.get(TIMER) != (playing(), play_interval())


def tick(steps: int) -> None:
    """While playing, advance one step per interval (a rerun for another reason does not advance); stop at the end."""
    state = st.session_state
    if not playing():
        return
    now = time.monotonic()
    if now - state.get(LAST_TICK, 0.0) < 0.8 * play_interval():
        return
    state[LAST_TICK] = now
    if state[STEP] >= steps - 1:
        state[PLAYING] = False
    else:
        state[STEP] += 1


@callback
def toggle_play(steps: int) -> None:
    """Play from the current step (from the start when at the end), or pause."""
    state = st.session_state
    if playing():
        state[PLAYING] = False
        return
    if state.get(STEP, 0) >= steps - 1:
        state[STEP] = 0
    state[PLAYING] = True
    state[LAST_TICK] = time.monotonic()


# -- clicks on the figures -------------------------------------------------------------------------------

def follow_click(walk: RecursionWalk, figures: "WalkFigures", on_graph, on_tree, on_timeline) -> bool:
    """Act on a click on the lesson's charts (their ``st.echarts_chart`` selections); True if there was one.

    A tensor: remember it (the page lists the calls that compute it) and go to the first of them. A bag
    of the separator tree: go to the first call that works in it (a toast says when none does). A point
    of the memory timeline: go to the step holding that op.
    """
    steps = len(walk.steps)
    tensor = next((figures.graph.tensor_at(i) for i in _picked(on_graph, figures.graph.nodes_series_index)), None)
    if tensor is not None:
        st.session_state[PICKED_TENSOR] = tensor
        found = walk.computing_steps.get(tensor)
        if found:
            go_to(found[0], steps)
        return True
    bag = next(iter(_picked(on_tree, figures.tree.nodes_series_index)), None)
    if bag is not None:
        first = walk.first_call_in_frame(bag)
        if first is None:
            st.toast(f"No call works in bag {bag}: nothing below it was needed when the recursion got there.")
        else:
            go_to(walk.first_step[first], steps)
        return True
    op = next((figures.timeline.op_at(i) for i in _picked(on_timeline, figures.timeline.steps_series_index)), None)
    if op is not None:
        go_to(walk.step_of_op(op), steps)
        return True
    return False


def _picked(event, series: int) -> list[int]:
    """The data indices a chart's selection picked in series ``series``."""
    if not event or not event.selection:
        return []
    return [i for group in event.selection.selected if group.get("series_index") == series
            for i in group.get("data_indices", ())]
