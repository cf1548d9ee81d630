"""The traced ops of a module call matched to the ops its own forward shows a selective-checkpoint policy.

A plan in SAC's terms names FX ops of the traced step; installed on the model's own modules it must name the ops
eager PyTorch dispatches (:mod:`remat_core.frontends.tracing.eager_ops` records them). :func:`eager_ops` matches
the two by name, in order (an in-place op matches its functional form, eager BatchNorm its traced one): each
matched traced op gets its eager name and occurrence (what a policy counts) and whether SAC can cache it: not the
output of an in-place op, nor one a later op of the call mutates in place (SAC caches a tensor before autograd
bumps its version, so it would refuse it at the backward: "Tensor cached during selective activation checkpoint
has been mutated"). :func:`region_module` says which module a span of traced forward ops is one call of.

Torch-free: the FX nodes are only read; the recording is the joint's (``graph.attachments.joint.eager_calls``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import NotModuleBounded
from .sac_program import forward_ops, forward_returns

BATCH_NORMS = {"_batch_norm_with_update": "_native_batch_norm_legit", "native_batch_norm": "_native_batch_norm_legit",
               "cudnn_batch_norm": "_native_batch_norm_legit", "miopen_batch_norm": "_native_batch_norm_legit"}
"""Eager BatchNorm kernels -> the traced op they stand for."""


@dataclass(frozen=True)
class EagerOp:
    """A traced op as a policy sees it in the module's own forward."""

    op: str
    """The eager op's name (``aten.relu_.default``)."""
    occurrence: int
    """How many ops of that name came before it in the call."""
    cachable: bool
    """Whether SAC can save its output (see the module notes)."""


def eager_ops(graph: Any, paths: Sequence[str]) -> dict[str, dict[str, EagerOp]]:
    """Module path -> traced FX name -> :class:`EagerOp`, for the traced forward ops of one call of each module (a
    traced op no eager op matches is left out); kept on the graph.

    Raises
    ------
    NotModuleBounded
        For a module called more than once in a forward.
    """
    return graph.memo(f"eager ops of {tuple(paths)}", lambda: _eager_ops(graph, tuple(paths)))


def writes_its_inputs(graph: Any, paths: Sequence[str]) -> set[str]:
    """The modules among ``paths`` whose call writes in place into a tensor it was handed (``ReLU(inplace=True)``):
    a checkpoint around such a call would recompute from the changed tensor, so none is put there."""
    recorded = _recorded(graph, tuple(paths))
    found = set()
    for path, ops in recorded.items():
        made: set[int] = set()
        for record in ops:
            if any(storage not in made for storage in record.writes):
                found.add(path)
                break
            made.update(storage for storage in record.outputs if storage not in record.reads)
    return found


def _recorded(graph: Any, paths: tuple[str, ...]) -> dict[str, list[Any]]:
    return graph.memo(f"eager records of {paths}", lambda: graph.attachments.joint.eager_calls(paths))


def _eager_ops(graph: Any, paths: tuple[str, ...]) -> dict[str, dict[str, EagerOp]]:
    binding = graph.attachments.binding
    nodes = forward_ops(graph, forward_returns(graph, loss=True))
    recorded = _recorded(graph, paths)
    found = {}
    for path in paths:
        traced = [node for node in nodes if _within(binding.module_of.get(node.name, ""), path) and _is_op(node)]
        found[path] = _match(traced, recorded[path])
    return found


def region_module(graph: Any, nodes: Sequence[Any], start: int, end: int) -> str:
    """The module whose one call's forward ops are exactly ``nodes[start:end]`` (of :func:`forward_ops`);
    :class:`NotModuleBounded` naming what the span holds otherwise."""
    binding = graph.attachments.binding
    inside = [binding.module_of.get(node.name, "") for node in nodes[start:end]]
    path = _common_prefix(m for m in inside if m and not _is_loss(m))
    outside = [node.name for k, node in enumerate(nodes) if not start <= k < end
               and _within(binding.module_of.get(node.name, ""), path)]
    calls = {binding.module_calls.get(owner) for node in nodes[start:end] if binding.module_of.get(node.name) == path
             for owner in binding.storage.get(node.name, ())} - {None}
    if not path or any(map(_is_loss, inside)) or outside or len(calls) > 1:
        held = sorted({m.split(".")[0] if m else "<top>" for m in inside})
        why = ("its ops belong to no one module" if not path or any(map(_is_loss, inside)) else
               f"module {path!r} has ops outside it ({', '.join(outside[:3])})" if outside else
               f"module {path!r} is called {len(calls)} times in it")
        raise NotModuleBounded(f"the plan region {nodes[start].name}..{nodes[end - 1].name} is not one module call: "
                               f"{why} (it holds ops of {', '.join(held[:5])}); plan with regions at module "
                               f"boundaries (solver='sac-planner' on a model with blocks)")
    return path


def _within(module: str, path: str) -> bool:
    return bool(path) and (module == path or module.startswith(path + "."))


def _common_prefix(paths: Any) -> str:
    parts: list[str] | None = None
    for path in paths:
        pieces = path.split(".")
        if parts is None:
            parts = pieces
        else:
            k = 0
            while k < min(len(parts), len(pieces)) and parts[k] == pieces[k]:
                k += 1
            parts = parts[:k]
    return ".".join(parts or [])


def _is_loss(module: str) -> bool:
    return module.startswith("<")  # the loss function's ops (``<loss>``), outside the model's modules


def op_behind(node: Any) -> Any:
    """The op behind a ``getitem`` of its outputs (a plan may name either); the node itself for an op."""
    while node.op == "call_function" and not _is_op(node) and node.args and hasattr(node.args[0], "op"):
        node = node.args[0]
    return node


def _is_op(node: Any) -> bool:
    """An ATen op (an ``OpOverload``, which has a schema), not a ``getitem`` of one's outputs."""
    return node.op == "call_function" and hasattr(node.target, "_schema")


def _base_name(op: str) -> str:
    """An op's name as both forms of a step share it: ``aten.relu_.default`` and ``aten.relu.default`` -> ``relu``,
    ``_native_batch_norm_legit_functional`` and eager's ``_batch_norm_with_update`` -> ``_native_batch_norm_legit``."""
    name = (op.split(".")[1] if "." in op else op).removesuffix("_functional")
    name = BATCH_NORMS.get(name, name)
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name  # an in-place op: its functional form


def _match(traced: Sequence[Any], eager: Sequence[Any]) -> dict[str, EagerOp]:
    """Traced FX name -> the eager op standing for it, matched by name in order."""
    a = [_base_name(str(node.target)) for node in traced]
    b = [_base_name(record.op) for record in eager]
    mutated = _mutated(eager)
    occurrences, seen = [], {}
    for record in eager:
        occurrences.append(seen.get(record.op, 0))
        seen[record.op] = occurrences[-1] + 1
    found = {}
    for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            j = block.b + k
            found[traced[block.a + k].name] = EagerOp(eager[j].op, occurrences[j],
                                                      not eager[j].writes and j not in mutated)
    return found


def _mutated(eager: Sequence[Any]) -> set[int]:
    """The eager ops whose output a later op of the call writes in place. A storage's holders are the ops since it
    was last allocated afresh (an output whose storage the op did not read): its views and in-place ops too."""
    mutated: set[int] = set()
    holders: dict[int, list[int]] = {}
    for j, record in enumerate(eager):
        for storage in record.writes:
            mutated.update(holders.get(storage, ()))
        for storage in record.outputs:
            if storage in record.reads:
                holders.setdefault(storage, []).append(j)
            else:
                holders[storage] = [j]
    return mutated
