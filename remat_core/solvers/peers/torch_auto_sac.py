"""``torch-auto-sac``: PyTorch's automatic selective activation checkpointing (``torch.distributed._tools``), as a
peer.

PyTorch's pipeline, run on the traced model: ``MemTracker``, ``RuntimeEstimator`` and ``SACEstimator`` watch one
training step under ``FakeTensorMode`` (per module: its activation memory, its ops' sizes and times, the
trade-off curve of discarded memory against recomputation time); ``aggregate_stats`` and ``parse_module_info``
make the module tree; ``sac_milp`` picks the modules to checkpoint and the share of each one's activation memory
to discard within the memory budget; ``get_optimal_checkpointing_policy_per_module`` picks, per module, which of
its ops to save. It needs ``pulp`` (and ``pwlf`` for the trade-off curves).

Two things are ours:

- PyTorch times ops with CUDA events or a GPU roofline only; on a CPU each op is run on made-up tensors of its
  shapes and timed by the wall clock (:func:`cpu_estimate`), what its benchmark mode does on a GPU;
- its per-module decisions name ops in the order SAC's policy sees them (before functionalization); they are
  put on the traced step's ops of that module by aligning the two sequences of op names.

Its memory budget is its own estimate; the simulator judges the plan, and the budget asked of the MILP is
bisected for the largest one whose plan keeps ours (as ``torch-partitioner`` searches its fraction).

References
----------
PyTorch, ``torch/distributed/_tools/sac_estimator.py``, ``ilp_utils.py``, ``sac_ilp.py`` (torch 2.13).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import io
import logging
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from ...errors import InfeasibleBudget, SolverOptionError
from ...graph import ComputeGraph
from ...schedule import Schedule, checkpoint_all_peak, memory_lower_bound
from ...schedule.sac_program import SacPlan, span_names
from ..registry import SolverTags, register
from ..retry import Bisection, solve_until
from ..sac_plans import policy_schedule, traced_forward

NAME = "torch-auto-sac"
TRIES = 6
"""Budgets asked of PyTorch's MILP, after the first, while bisecting for a plan the simulator keeps."""
GIB = 2**30


@dataclass(frozen=True)
class AutoSacStats:
    """What PyTorch's estimators found on one step: its module graph and each module's per-op SAC stats."""

    graph: Any
    module_stats: Mapping[str, Any]
    root: str


@register(NAME, "PyTorch's automatic SAC: SACEstimator's per-op stats, sac_milp's per-module discard ratios for the "
                "budget, get_optimal_checkpointing_policy_per_module's ops (CPU wall-clock op times on a CPU).",
          tags=SolverTags(uses_traced_graph=True, needs_traced_model=True, sees_transients=True, deterministic=False,
                          meets_named_budget=False, searching=True),
          reference="PyTorch, torch/distributed/_tools/sac_ilp.py: sac_milp, "
                    "get_optimal_checkpointing_policy_per_module (torch 2.13)")
def torch_auto_sac(graph: ComputeGraph, budget: int, *, time_limit: float | None = None) -> Schedule:
    """PyTorch's automatic SAC at the largest budget asked of it whose plan keeps ``budget`` (see the module notes)."""
    del time_limit
    graph, nodes, returns = traced_forward(graph, NAME)
    stats = graph.memo("torch auto-SAC statistics", lambda: collect_stats(graph))

    def planned(asked: int) -> Schedule:
        return _schedule(graph, nodes, returns, stats, asked)

    try:
        search = solve_until(planned, budget, lambda schedule: schedule.solver_info["policy_peak"],
                             Bisection(memory_lower_bound(graph), TRIES, max(1, budget // 200)))
    except InfeasibleBudget:  # the MILP found no plan at the budget itself
        search = None
    if search is None or search.accepted is None:
        best = search.best_rejected if search is not None else None
        unbound = planned(checkpoint_all_peak(graph)).solver_info["policy_peak"]  # what it keeps with room to spare
        raise InfeasibleBudget(budget, unbound if unbound > budget else None, NAME,
                               "PyTorch's MILP found no plan for this budget" if best is None else
                               f"the plans PyTorch's MILP makes hold {best.peak:,} bytes at best by our simulator")
    return search.accepted.schedule


def _schedule(graph: ComputeGraph, nodes: Sequence[Any], returns: Sequence[str], stats: AutoSacStats,
              asked: int) -> Schedule:
    """The plan ``sac_milp`` makes for ``asked`` bytes, as the schedule SAC performs with it."""
    from torch.distributed._tools.sac_ilp import get_optimal_checkpointing_policy_per_module, sac_milp

    with _quiet():
        decisions, recomputation_ms, peak = sac_milp(stats.graph, memory_budget=asked / GIB)
    if peak < 0:
        raise InfeasibleBudget(asked, None, NAME, "PyTorch's MILP finds no plan within its estimate of the memory")
    binding = graph.attachments.binding
    regions, saved, policies = [], set(), {}
    for fqn, discard in sorted(decisions.items(), key=lambda item: _first_position(nodes, binding, item[0], stats)):
        path = _our_path(fqn, stats.root)
        span = _module_span(nodes, binding, path)
        if span is None:
            continue
        with _quiet():
            policy = get_optimal_checkpointing_policy_per_module(stats.module_stats[fqn], 1 - discard)
        policies[path] = [int(bit) for bit in policy]
        theirs = [(_name(n), bit) for n, bit in zip(stats.module_stats[fqn].func_names, policy)]
        saved |= _aligned_saves(nodes[span[0]:span[1]], theirs)
        regions.append(span_names(nodes, *span))
    return policy_schedule(graph, 2**62, SacPlan(tuple(regions), frozenset(saved)), returns, NAME,
                               f"PyTorch's sac_milp at {asked / 2**20:.1f} MiB", {
                                   "policy": "sac_milp", "milp_budget": asked, "discard": dict(decisions),
                                   "milp_recomputation_ms": recomputation_ms, "milp_peak": peak,
                                   "checkpointed": list(policies), "op_policies": policies})


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """PyTorch's estimators print their totals, log their MILPs' failures and fit curves with NumPy warnings: kept
    off the user's terminal (a failure still reaches the caller as an exception or an empty plan)."""
    logger = logging.getLogger("torch.distributed._tools.sac_ilp")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # pwlf fitting a module whose ops took no time
            yield
    finally:
        logger.setLevel(level)


def _our_path(fqn: str, root: str) -> str:
    """A module's path in the traced model from PyTorch's ModTracker name (the root's class name first)."""
    return "" if fqn == root else fqn.removeprefix(root + ".")


def _in_module(module: str, path: str) -> bool:
    return module != "<loss>" and (not path or module == path or module.startswith(path + "."))


def _module_span(nodes: Sequence[Any], binding: Any, path: str) -> tuple[int, int] | None:
    positions = [k for k, node in enumerate(nodes) if _in_module(binding.module_of.get(node.name, ""), path)]
    return (positions[0], positions[-1] + 1) if positions else None


def _first_position(nodes: Sequence[Any], binding: Any, fqn: str, stats: AutoSacStats) -> int:
    span = _module_span(nodes, binding, _our_path(fqn, stats.root))
    return span[0] if span else len(nodes)


def _name(op: Any) -> str:
    """An op's name without overload or in-place mark: ``add_.Tensor`` -> ``add``."""
    text = str(op).removeprefix("aten.").split(".")[0]
    return text.rstrip("_") or text


def _aligned_saves(ours: Sequence[Any], theirs: Sequence[tuple[str, int]]) -> set[str]:
    """The FX names of our ops that PyTorch's decisions save: the two op sequences aligned by name."""
    mine = [_name(getattr(node.target, "_overloadpacket", node.target)) for node in ours]
    matcher = difflib.SequenceMatcher(a=mine, b=[name for name, _ in theirs], autojunk=False)
    saved = set()
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            if theirs[block.b + k][1]:
                saved.add(ours[block.a + k].name)
    return saved


def collect_stats(graph: ComputeGraph) -> AutoSacStats:
    """PyTorch's estimators on one step of the traced model, on fake tensors (see the module notes).

    Raises
    ------
    SolverOptionError
        When ``pulp`` or ``pwlf`` is missing, or the estimators fail on this model (not applicable, with why).
    """
    try:
        import pulp  # noqa: F401
        import pwlf  # noqa: F401
    except ImportError as error:
        raise SolverOptionError(f"not applicable: {NAME} needs PyTorch's MILP's packages ({error}); install pulp "
                                f"and pwlf (make run and make test do)") from error
    import torch
    from torch._subclasses.fake_tensor import FakeCopyMode, FakeTensorMode
    from torch.distributed._tools.ilp_utils import aggregate_stats, parse_module_info
    from torch.distributed._tools.mem_tracker import MemTracker, _ModState
    from torch.distributed._tools.runtime_estimator import RuntimeEstimator
    from torch.distributed._tools.sac_estimator import SACEstimator

    joint = graph.attachments.joint
    device = next((t.device for t in joint.inputs), torch.device("cpu"))
    try:
        with _quiet(), FakeTensorMode(allow_non_fake_inputs=True) as fake:
            with FakeCopyMode(fake):
                model = copy.deepcopy(joint.model)
            inputs = [fake.from_tensor(t) for t in joint.inputs]

            def loss() -> Any:
                return joint.loss_of(joint.call_model(model, inputs[:joint.num_model_inputs]),
                                     inputs[joint.num_model_inputs:])

            tracker = MemTracker()
            tracker.track_external(model)
            with tracker as tracking:
                loss().backward()
                last = tracking.get_tracker_snapshot("current")
            for stats in tracker.memory_tracking.values():  # modules whose inputs need no gradient see no backward
                for state in (_ModState.PRE_BW, _ModState.PEAK_BW, _ModState.POST_BW):
                    if state not in stats.snapshots:
                        stats.snapshots[state] = [copy.deepcopy(last)]
            model.zero_grad(set_to_none=True)
            runtime = RuntimeEstimator()("operator-level-benchmark")
            sac = SACEstimator()("operator-level-benchmark")
            if device.type != "cuda":
                runtime._estimate = cpu_estimate
                sac._estimate_runtime = cpu_estimate
            with runtime:
                loss().backward()
            model.zero_grad(set_to_none=True)
            with sac:
                value = loss()
            value.backward()
            info = aggregate_stats(model, tracker, runtime, sac, device)
        # A module called twice is one unit, and one never called (or not tracked) none.
        known = {stats["fqn"] for stats in info["mod_stats"]} & set(info["mod_order"]["fw_pre_order"]) \
            & set(info["mod_order"]["fw_post_order"])
        for key in ("fw_pre_order", "fw_post_order"):
            info["mod_order"][key] = [fqn for fqn in dict.fromkeys(info["mod_order"][key]) if fqn in known]
        info["mod_stats"] = [stats for stats in info["mod_stats"] if stats["fqn"] in known]
        module_graph = parse_module_info(info)
        for node in module_graph.nodes:  # a module whose ops all took no measurable time fits a curve of NaNs
            for key in ("slopes", "intercepts"):
                node[key] = [value if math.isfinite(value) else 0.0 for value in node[key]]
    except SolverOptionError:
        raise
    except Exception as error:  # PyTorch's estimators on a model they were not written for: say so, do not crash
        raise SolverOptionError(f"not applicable: PyTorch's SAC estimators failed on this model "
                                f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
                                ) from error
    root = module_graph.nodes[0]["fqn"]
    return AutoSacStats(module_graph, dict(sac.sac_mod_stats), root)


def cpu_estimate(func: Any, args: Any, kwargs: Any) -> tuple[Any, float]:
    """An op's result on fake tensors and its time in milliseconds: run on made-up real tensors of its shapes and
    timed by the wall clock (the median of three runs after one warm-up), as PyTorch's benchmark mode times it with
    CUDA events on a GPU; 0 for a view or an op that cannot run on made-up values."""
    import torch
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.distributed._tools.runtime_estimator import RuntimeEstimator
    from torch.utils._pytree import tree_map

    result = func(*args, **(kwargs or {}))
    fake = RuntimeEstimator.fake_mode
    if torch.Tag.view_copy in getattr(func, "tags", ()) or getattr(func, "is_view", False):
        return result, 0.0
    with unset_fake_temporarily():
        def real(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and fake is not None and fake.is_our_fake(value):
                made = torch.empty(value.shape, dtype=value.dtype)
                return made.uniform_() if value.dtype.is_floating_point else made.zero_()
            return value
        try:
            real_args, real_kwargs = tree_map(real, (args, kwargs or {}))
            func(*real_args, **real_kwargs)
            times = []
            for _ in range(3):
                started = time.perf_counter()
                func(*real_args, **real_kwargs)
                times.append(time.perf_counter() - started)
        except Exception:  # noqa: BLE001 - an op that checks its values: no time, as PyTorch's fallback gives none
            return result, 0.0
    return result, sorted(times)[1] * 1e3
