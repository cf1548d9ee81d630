"""``sac-planner``: the cheapest plan of checkpoint regions and saved ops SAC can follow, for the measured time.

The decisions are SAC's own (:class:`~remat_core.schedule.sac_program.SacPlan`): each block of the model (its
decoder or encoder layers, its repeated modules, else its top-level modules) runs plainly or as a checkpoint
region, and inside a region each op saves its output or is recomputed. Each block chooses from a menu of
policies: plain, recompute everything, and saving the ops that cost most time per byte kept, a growing prefix of
them (matmuls and attention first, as a rule).

The plan is a dynamic program over the blocks (Rockmate's and torchtitan's planner's shape). What a block's
policy does is measured once on the SAC route (:func:`~remat_core.schedule.sac_route.sac_route_ops` simulated
with that block alone under it): the bytes it no longer keeps from its forward to its backward, the bump its
recomputation adds during its backward and its forward, and the time it recomputes (blocks with the same ops
share their figures). Memory then adds up along the backward: while block ``k`` runs its backward, the earlier
blocks still keep what their policies keep. The program keeps, for each sum of bytes saved so far, the least
recomputation. Its sums are estimates: it is asked for a few budgets around the one asked, each plan simulated
whole and, when over, planned again for that much less (:func:`~remat_core.solvers.retry.solve_until`); the
cheapest plan that fits is kept (or the plan that keeps least, which a refusal names when none does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ...errors import InfeasibleBudget, NotModuleBounded
from ...schedule.eager_match import eager_ops, op_behind, region_module, writes_its_inputs
from ...graph import ComputeGraph
from ...schedule import Schedule, simulate
from ...schedule.sac_program import SacPlan, block_spans, program_of_plan, span_names
from ...schedule.sac_route import sac_policy_cost, sac_route_ops
from ..registry import SolverTags, register
from ..retry import Shrink, solve_until
from ..sac_plans import EXPENSIVE_OPS, policy_schedule, saved_by_op_list, traced_forward

NAME = "sac-planner"
STEPS = 2000
"""Buckets the dynamic program rounds the bytes saved to (of the budget): finer plans, slower planning."""
PREFIXES = 6
"""Saved-op prefixes a block's menu holds (besides plain and recompute-everything)."""
ASKED = (0.9, 1.0, 1.05, 1.12, 1.25, 1.5)
"""The budgets, as shares of the one asked, the program is asked for first: its sums of per-block effects are
estimates that err both ways, and the simulator keeps the cheapest plan that fits."""
IMPROVING = 60
"""Simulations the last pass may spend making the plan cheaper one block at a time."""
SHRINKS = 4
"""Plans per first budget: each next one asked for what the simulator found the last one over by
(:func:`~remat_core.solvers.retry.solve_until`)."""


@dataclass(frozen=True)
class Policy:
    """One way of running a block: plainly, or checkpointed with these ops saved; ``spans`` (positions among the
    forward ops) are the regions when they are some of the block's child modules, not the whole block."""

    checkpointed: bool
    saved: frozenset[str] = frozenset()
    label: str = "plain"
    spans: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class Effect:
    """What one block's policy does to the step, measured on the SAC route with that block alone under it."""

    saved_bytes: int
    """Bytes the block no longer keeps from its forward to its backward (against plain)."""
    backward_bump: int
    """What its backward's peak rises by, beyond what the bytes saved take off."""
    forward_bump: int
    """What its forward's peak rises by."""
    seconds: float
    """The time (cost) it recomputes."""


@register(NAME, "Checkpoint regions at the model's blocks and saved ops inside them, chosen by a dynamic program "
                "for the budget, priced by the SAC route's own recomputation: what SAC runs, planned for.",
          tags=SolverTags(uses_traced_graph=True, needs_traced_model=True, sees_transients=True),
          reference="after Rockmate (Zhao et al., ICML 2023): a program over blocks, a choice inside each")
def sac_planner(graph: ComputeGraph, budget: int, *, time_limit: float | None = None) -> Schedule:
    """The least recomputation SAC can run within ``budget`` (see the module notes)."""
    del time_limit
    graph, nodes, returns = traced_forward(graph, NAME)
    table = graph.memo("sac-planner table", lambda: _Table(graph, nodes, returns))

    best: Schedule | None = None
    for share in ASKED:  # the program's sums are estimates: ask it around the budget, shrink where it overshoots
        search = solve_until(table.planned, budget, lambda schedule: schedule.solver_info["policy_peak"],
                             Shrink(0, SHRINKS), first=int(budget * share))
        found = search.accepted.schedule if search.accepted is not None else None
        if found is not None and (best is None or found.solver_info["policy_cost"] < best.solver_info["policy_cost"]):
            best = found
    alike = [table.schedule(choice) for choice in [*table.uniform_choices(), table.least_choice()]]
    for found in alike:  # every block alike: what the peers do
        if found.solver_info["policy_peak"] <= budget and (
                best is None or found.solver_info["policy_cost"] < best.solver_info["policy_cost"]):
            best = found
    best = table.improved(best, budget) if best is not None else None
    if best is None:
        least = min(alike, key=lambda schedule: schedule.solver_info["policy_peak"])
        peak = least.solver_info["policy_peak"]
        raise InfeasibleBudget(budget, peak, NAME, f"the plans SAC can follow hold {peak:,} bytes at the least "
                                                   f"({len(least.solver_info['checkpointed'])} of "
                                                   f"{len(table.blocks)} blocks checkpointed)")
    return best


class _Table:
    """Every block's menu of policies and their measured effects (built once per graph)."""

    def __init__(self, graph: ComputeGraph, nodes: Sequence[Any], returns: Sequence[str]):
        self.graph, self.nodes, self.returns = graph, nodes, list(returns)
        self._schedules: dict[tuple, Schedule] = {}
        self._choices: dict[int, dict[int, Policy]] = {}
        self.blocks = list(_segments(graph, nodes).items())
        cachable = _cachable(graph, nodes, [span for _, span in self.blocks])
        self.menus = [_menu(graph, nodes, span, cachable) for _, span in self.blocks]
        self.plain = simulate(graph, self._ops({}))
        self.plain_figures = self._figures(self.plain, self._ops({}))
        self.effects: list[list[Effect]] = []
        measured: dict[tuple, list[Effect]] = {}
        for k, (block, span) in enumerate(self.blocks):
            signature = _signature(nodes[span[0]:span[1]])
            if signature not in measured:
                measured[signature] = [self._effect(k, policy) for policy in self.menus[k]]
            self.effects.append(measured[signature])

    def _plan(self, choice: Mapping[int, Policy]) -> SacPlan:
        regions, saved = [], set()
        for k, policy in sorted(choice.items()):
            if policy.checkpointed:
                regions.extend(span_names(self.nodes, *span) for span in policy.spans or [self.blocks[k][1]])
                saved |= policy.saved
        return SacPlan(tuple(regions), frozenset(saved))

    def _ops(self, choice: Mapping[int, Policy]) -> list:
        return sac_route_ops(self.graph, self._program(choice))

    def _program(self, choice: Mapping[int, Policy]) -> Any:
        return program_of_plan(self.graph, self.returns, self._plan(choice))

    def _figures(self, result: Any, ops: list) -> dict[str, Any]:
        """Per block: the peak of its forward and of its backward, and the memory when the backward starts."""
        binding = self.graph.attachments.binding
        block_of_node = {}
        for k, (_, (start, end)) in enumerate(self.blocks):
            for node in self.nodes[start:end]:
                for owner in binding.storage.get(node.name, ()):
                    block_of_node[owner] = k
        modules = {n.id: n.module or "" for n in self.graph.nodes}
        kinds = {n.id: n.kind for n in self.graph.nodes}
        names = [b for b, _ in self.blocks]
        during = [m + (result.transient[i] if result.transient else 0) for i, m in enumerate(result.memory)]
        backward_start = next(i for i, (_, v) in enumerate(ops) if kinds[v] == "backward")
        forward_peak = [0] * len(self.blocks)
        backward_peak = [0] * len(self.blocks)
        for i, (action, v) in enumerate(ops):
            if i < backward_start:
                k = block_of_node.get(v)
                if k is not None:
                    forward_peak[k] = max(forward_peak[k], during[i])
            else:
                k = block_of_node.get(v)
                if k is None and kinds[v] == "backward":
                    k = next((j for j, b in enumerate(names) if modules[v] == b or modules[v].startswith(b + ".")),
                             None)
                if k is not None:
                    backward_peak[k] = max(backward_peak[k], during[i])
        first_block = min((i for i, (_, v) in enumerate(ops) if i >= backward_start and (
            block_of_node.get(v) is not None or any(modules[v] == b or modules[v].startswith(b + ".")
                                                    for b in names))), default=len(ops))
        tail = max(during[backward_start - 1:first_block] or [0])
        return {"forward": forward_peak, "backward": backward_peak, "tail": tail,
                "kept": result.memory[backward_start - 1] if backward_start else 0, "peak": result.peak}

    def _effect(self, k: int, policy: Policy) -> Effect:
        if not policy.checkpointed:
            return Effect(0, 0, 0, 0.0)
        ops = self._ops({k: policy})
        result = simulate(self.graph, ops)
        figures = self._figures(result, ops)
        plain = self.plain_figures
        saved = plain["kept"] - figures["kept"]
        return Effect(saved, figures["backward"][k] - plain["backward"][k] + saved,
                      figures["forward"][k] - plain["forward"][k],
                      result.cost - self.plain.cost + sac_policy_cost(self.graph, self._program({k: policy})))

    def plan(self, budget: int) -> dict[int, Policy] | None:
        """The least-recomputation choice of a policy per block whose estimated peak keeps ``budget`` (None: none
        does), by the dynamic program over the bytes saved so far (see the module notes)."""
        plain = self.plain_figures
        step = max(1, budget // STEPS)
        states: dict[int, tuple[float, tuple[int, ...]]] = {0: (0.0, ())}  # bytes saved (in steps) -> best so far
        for k in range(len(self.blocks)):
            following: dict[int, tuple[float, tuple[int, ...]]] = {}
            for saved, (seconds, picks) in states.items():
                before = saved * step
                for p, effect in enumerate(self.effects[k]):
                    if plain["forward"][k] - before + effect.forward_bump > budget:
                        continue
                    after = before + effect.saved_bytes
                    if plain["backward"][k] - after + effect.backward_bump > budget:
                        continue
                    key = math.floor(after / step)
                    candidate = (seconds + effect.seconds, picks + (p,))
                    if key not in following or candidate[0] < following[key][0]:
                        following[key] = candidate
            states = following
        fitting = [(seconds, picks) for saved, (seconds, picks) in states.items()
                   if plain["tail"] - saved * step <= budget]
        if not fitting:
            return None
        _, picks = min(fitting)
        return {k: self.menus[k][p] for k, p in enumerate(picks)}

    def uniform_choices(self) -> list[dict[int, Policy]]:
        """Each policy of the menu on every block (blocks whose menu lacks it keep theirs plain)."""
        longest = max(len(menu) for menu in self.menus)
        return [{k: menu[p] if p < len(menu) else menu[0] for k, menu in enumerate(self.menus)}
                for p in range(longest)]

    def improved(self, schedule: Schedule, budget: int) -> Schedule:
        """``schedule``'s plan made cheaper one block at a time, while the simulator keeps it within ``budget``:
        each pass tries every block's cheaper policies (by their measured recomputation) and takes the best that
        fits; at most :data:`IMPROVING` simulations in all."""
        choice = self._choice_of(schedule)
        tried = 0
        while tried < IMPROVING:
            best = schedule
            for k, menu in enumerate(self.menus):
                current = self.effects[k][menu.index(choice[k])].seconds
                for p, policy in enumerate(menu):
                    if self.effects[k][p].seconds >= current or tried >= IMPROVING:
                        continue
                    tried += 1
                    candidate = self.schedule({**choice, k: policy})
                    if (candidate.solver_info["policy_peak"] <= budget
                            and candidate.solver_info["policy_cost"] < best.solver_info["policy_cost"]):
                        best = candidate
            if best is schedule:
                return schedule
            schedule, choice = best, self._choice_of(best)
        return schedule

    def _choice_of(self, schedule: Schedule) -> dict[int, Policy]:
        return self._choices[id(schedule)]

    def planned(self, asked: int) -> Schedule:
        """The program's plan for ``asked`` bytes as a schedule (the plan that keeps least when none fits)."""
        return self.schedule(self.plan(asked) or self.least_choice())

    def schedule(self, choice: Mapping[int, Policy]) -> Schedule:
        """The schedule SAC performs with ``choice``, simulated (kept: the same choice is asked for again)."""
        key = tuple(sorted((k, self.menus[k].index(p)) for k, p in choice.items()))
        if key not in self._schedules:
            self._schedules[key] = self._schedule(choice)
        return self._schedules[key]

    def _schedule(self, choice: Mapping[int, Policy]) -> Schedule:
        labels = [f"{self.blocks[k][0]}: {policy.label}" for k, policy in sorted(choice.items()) if policy.checkpointed]
        checkpointed = [self.blocks[k][0] for k, policy in sorted(choice.items()) if policy.checkpointed]
        schedule = policy_schedule(self.graph, 2**62, self._plan(choice), self.returns, NAME,
                                   f"{len(checkpointed)} block(s) checkpointed by the planner",
                                   {"policy": "sac-planner", "checkpointed": checkpointed, "choices": labels,
                                    "blocks": len(self.blocks)})
        self._choices[id(schedule)] = dict(choice)
        return schedule

    def least_choice(self) -> dict[int, Policy]:
        """The plan that keeps least: every block recomputed whole."""
        return {k: menu[1] for k, menu in enumerate(self.menus)}


def _segments(graph: ComputeGraph, nodes: Sequence[Any]) -> dict[str, tuple[int, int]]:
    """The blocks to decide for: the model's blocks; else its top-level modules; else runs of about sqrt(n) ops."""
    spans = block_spans(graph, nodes)
    if spans:
        return spans
    binding = graph.attachments.binding
    spans = {}
    for k, node in enumerate(nodes):
        top = binding.module_of.get(node.name, "").split(".")[0]
        if top and top != "<loss>":
            start, end = spans.get(top, (k, k + 1))
            spans[top] = (min(start, k), max(end, k + 1))
    ordered = sorted(spans.items(), key=lambda item: item[1])
    if len(ordered) >= 2 and all(a[1][1] <= b[1][0] for a, b in zip(ordered, ordered[1:])):
        return dict(ordered)
    size = max(1, math.isqrt(len(nodes)))
    return {f"ops {start}-{min(start + size, len(nodes)) - 1}": (start, min(start + size, len(nodes)))
            for start in range(0, len(nodes), size)}


def _cachable(graph: ComputeGraph, nodes: Sequence[Any], spans: Sequence[tuple[int, int]]) -> set[str] | None:
    """The FX names of the ops whose outputs SAC can save when each span runs as its module's own forward
    (:func:`~remat_core.frontends.tracing.eager_ops.eager_ops`: not in-place, not mutated later); None when the
    spans are not module calls (the traced program runs them, and saves any op)."""
    if not graph.attachments.executable:
        return None
    try:
        paths = [region_module(graph, nodes, start, end) for start, end in spans]
        seen = eager_ops(graph, paths)
    except NotModuleBounded:
        return None
    return {name for ops in seen.values() for name, op in ops.items() if op.cachable}


def _menu(graph: ComputeGraph, nodes: Sequence[Any], span: tuple[int, int], cachable: set[str] | None
          ) -> list[Policy]:
    """A block's policies: plain, recompute everything, and saving the ops of most time per byte, by prefixes; only
    ops in ``cachable`` are saved, when it is given."""
    binding = graph.attachments.binding
    block = [node for node in nodes[span[0]:span[1]]
             if cachable is None or op_behind(node).name in cachable]
    ranked = []
    for node in block:
        owners = [o for o in binding.storage.get(node.name, ()) if o in graph.index and binding.producer.get(o)
                  == node.name or (o in graph.index and binding.producer.get(o, "").startswith(node.name))]
        size = sum(graph.node(o).mem for o in owners)
        seconds = sum(graph.node(o).cost for o in owners)
        if owners and size > 0 and seconds > 0:
            ranked.append((seconds / size, node.name))
    ranked.sort(reverse=True)
    menu = [Policy(False), Policy(True, frozenset(), "recompute everything"),
            Policy(True, frozenset(saved_by_op_list(block)), "save matmuls and attention but every second mm"),
            Policy(True, frozenset(n.name for n in block if str(n.target) in EXPENSIVE_OPS),
                   "save every matmul, convolution and attention")]
    if ranked:
        counts = sorted({max(1, round(len(ranked) * (j / PREFIXES) ** 2)) for j in range(1, PREFIXES + 1)})
        for count in counts:
            menu.append(Policy(True, frozenset(name for _, name in ranked[:count]),
                               f"save the {count} op(s) of most time per byte"))
    children = _child_spans(graph, nodes, span) if cachable is not None else {}
    for child, child_span in children.items():  # plain checkpoints of one child module: no policy asked per op
        menu.append(Policy(True, frozenset(), f"checkpoint {child} alone", (child_span,)))
    if len(children) > 2:
        menu.append(Policy(True, frozenset(), f"checkpoint {', '.join(children)}", tuple(children.values())))
    return menu


def _child_spans(graph: ComputeGraph, nodes: Sequence[Any], span: tuple[int, int]) -> dict[str, tuple[int, int]]:
    """The block's direct child modules whose forward ops are one call each within the block (by their last path
    part), with their spans; those of a single op, and those writing in place into what they are handed, are left
    out."""
    binding = graph.attachments.binding
    block = binding.module_of.get(nodes[span[0]].name, "")
    spans: dict[str, tuple[int, int]] = {}
    for k in range(*span):
        module = binding.module_of.get(nodes[k].name, "")
        parent = next((b for b in binding.blocks if module == b or module.startswith(b + ".")), block)
        rest = module[len(parent) + 1:] if module.startswith(parent + ".") else ""
        if rest:
            child = f"{parent}.{rest.split('.')[0]}"
            start, end = spans.get(child, (k, k + 1))
            spans[child] = (min(start, k), max(end, k + 1))
    bounded = {}
    for child, (start, end) in sorted(spans.items(), key=lambda item: item[1]):
        if end - start < 2:
            continue
        try:
            region_module(graph, nodes, start, end)
        except NotModuleBounded:
            continue
        bounded[child] = (start, end)
    try:
        unsafe = writes_its_inputs(graph, list(bounded))
    except NotModuleBounded:  # a child called more than once
        return {}
    return {child.rsplit(".", 1)[-1]: span for child, span in bounded.items() if child not in unsafe}


def _signature(nodes: Sequence[Any]) -> tuple:
    """What makes two blocks alike: their ops and shapes, in order."""
    def shape(node: Any) -> Any:
        value = node.meta.get("val")
        return tuple(getattr(value, "shape", ())) if not isinstance(value, (tuple, list)) else len(value)
    return tuple((str(node.target), shape(node)) for node in nodes)
