"""One exception tree for the whole package.

Every error a user can cause derives from :class:`RematError`, and its message says what was wrong
and what would work. The CLI maps them to exit codes: :class:`InvalidSchedule` -> 1,
:class:`InfeasibleBudget` -> 3, :class:`SearchStopped` -> 5, every other :class:`RematError` -> 2; any
other exception is a bug of this package (exit 4, "internal error").
"""

from __future__ import annotations


def first_line(error: BaseException, limit: int | None = None) -> str:
    """The first line of ``error``'s message ("(no message)" when it has none), cut to ``limit`` characters."""
    lines = str(error).strip().splitlines()
    line = lines[0] if lines else "(no message)"
    return line if limit is None or len(line) <= limit else line[:limit - 3] + "..."


class RematError(Exception):
    """Base class of every error this package raises on purpose."""


class GraphError(RematError, ValueError):
    """A graph (or graph file) that cannot be used: malformed JSON, a cycle, a bad node..."""


class ScheduleFormatError(RematError, ValueError):
    """A schedule file that is not a readable ``remat-schedule`` document."""


class BudgetError(RematError, ValueError):
    """A memory budget that cannot be understood (bad text, negative, unknown unit)."""


class UnknownSolver(RematError, KeyError):
    """A solver name that is not in the registry."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class SolverOptionError(RematError, ValueError):
    """A solver option that the solver does not declare, or a value outside its range."""


class DecompositionError(RematError, ValueError):
    """A tree or path decomposition that cannot be built, read or trusted.

    Raised for an unknown method, a graph above the exact method's size limit, a malformed
    decomposition document, or a decomposition that breaks one of the three properties
    (:func:`remat_core.decompose.validate` names which one and where).
    """


class SolverLimitExceeded(RematError):
    """A solver stopped at one of its declared limits (a compute-op cap, a search budget).

    The message names the limit, the option that raises it and what else would work.
    """


class InvalidSchedule(RematError):
    """A schedule that breaks a simulator rule.

    Parameters
    ----------
    step : int
        Index of the offending op (``len(ops)`` for a rule checked at the end).
    op : tuple or None
        The offending ``(action, node)`` pair, None for an end-of-schedule rule.
    reason : str
        What was wrong.
    """

    def __init__(self, step: int, op: tuple[str, str] | None, reason: str):
        self.step = step
        self.op = op
        self.reason = reason
        where = f"step {step} {list(op)}" if op is not None else f"end of schedule (after step {step - 1})"
        super().__init__(f"invalid schedule at {where}: {reason}")

    def __reduce__(self):  # crosses process boundaries (worker pools, Ray) whole
        return type(self), (self.step, self.op, self.reason)


class InfeasibleBudget(RematError):
    """No schedule the solver can build fits the budget.

    Parameters
    ----------
    budget : int
        The budget asked for, in bytes.
    smallest_feasible : int or None
        The smallest budget the solver knows to be feasible, if it knows one.
    solver : str
        The solver that gave up.
    detail : str
        Extra explanation (for example: below the graph's lower bound).
    """

    def __init__(self, budget: int, smallest_feasible: int | None = None, solver: str = "", detail: str = ""):
        self.budget = budget
        self.smallest_feasible = smallest_feasible
        self.solver = solver
        self.detail = detail
        who = f"solver '{solver}'" if solver else "the solver"
        msg = f"budget {budget:,} bytes is infeasible for {who}"
        if detail:
            msg += f" ({detail})"
        if smallest_feasible is not None:
            msg += f"; smallest known feasible budget: {smallest_feasible:,} bytes"
        else:
            msg += "; no feasible budget is known"
        super().__init__(msg)

    def __reduce__(self):
        return type(self), (self.budget, self.smallest_feasible, self.solver, self.detail)


class SearchStopped(InfeasibleBudget):
    """A search that reached its time limit before it found a schedule within the budget.

    Not a proof: a longer time limit may find one. ``smallest_feasible`` is the smallest budget
    known to fit (None when none is known); ``detail`` says what was tried.
    """


class ZooError(RematError, ValueError):
    """An unknown zoo model, or a model option it does not declare or outside the option's range."""


class TraceError(RematError):
    """A model that could not be turned into a training graph.

    Parameters
    ----------
    model : str
        What was being traced (a zoo name, a file, ``package.module:factory``, a class name).
    reason : str
        What went wrong.
    op : str, optional
        The operator that failed (``aten.nonzero.default``), when known.
    module : str, optional
        The ``nn.Module`` path it failed in (``layer3.1.conv2``), when known.
    hint : str, optional
        What would work instead.
    """

    def __init__(self, model: str, reason: str, op: str | None = None, module: str | None = None,
                 hint: str | None = None):
        self.model = model
        self.reason = reason
        self.op = op
        self.module = module
        self.hint = hint
        where = "".join([f" in module '{module}'" if module else "", f" at op {op}" if op else ""])
        message = f"cannot trace {model}{where}: {reason}"
        if hint:
            message += f"\nhint: {hint}"
        super().__init__(message)

    def __reduce__(self):
        return type(self), (self.model, self.reason, self.op, self.module, self.hint)


class OnnxImportError(TraceError, GraphError):
    """An ONNX model that cannot be imported, worded like every tracing failure (the model, the
    failing op when known, a hint). Also a :class:`GraphError`: ``load_graph`` reads ``.onnx`` files."""


class DistributedError(RematError):
    """A run across workers that could not start or finish: a port in use, a worker that died or raised, a run
    that timed out or was cancelled. The message names the worker (its rank and process id) when one is at fault;
    the other workers have been stopped."""


class ExecutionError(RematError):
    """A graph that cannot be executed (not traced from a model), or an op that failed on real tensors."""


class NotModuleBounded(ExecutionError):
    """A plan region that is not one call of one module, so no checkpoint around a module's forward runs it (the
    message names the region and what it holds)."""
