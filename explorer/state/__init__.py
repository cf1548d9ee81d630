"""What the explorer remembers: the session's model, budget, solvers and options, where models come from
(the built-in default, generated graphs, uploads, the zoo), the host link solves may offload over, and where that state lives beyond a session.

Pages read and set the session through this package's face (``from explorer import state``;
``state.graph()``, ``state.set_budget(...)``); :mod:`.models` and :mod:`.zoo` build the models,
:mod:`.uploads` keeps uploaded files on disk by content hash, :mod:`.budgets` is the range and scale of
budgets, :mod:`.url` keeps the state in the page's URL, :mod:`.links` builds links to a page in a state, and the
pages with state of their own keep it here too: :mod:`.learn` (the Learn page's lesson and its one step value),
:mod:`.gnn` (the Distributed page's choices).
"""

from .session import (BUDGET, COMPARE, DEFAULT_BUDGET_FRACTION, DEFAULT_TIME_LIMIT, LINK, MODEL, NOTICE, OPTIONS,
                      PARETO_LOG, PREFERRED_SOLVERS, SOLVER, TIME_LIMIT, WHY_TENSOR, Model, budget, compared,
                      default_budget, default_solver, ensure, graph, link, link_text, model, notice, options_of,
                      pareto_log, pop_notice, set_budget, set_link, set_model, set_option, set_pareto_log,
                      solve_options, solver, time_limit)

__all__ = ["BUDGET", "COMPARE", "DEFAULT_BUDGET_FRACTION", "DEFAULT_TIME_LIMIT", "LINK", "MODEL", "NOTICE", "OPTIONS",
           "PARETO_LOG", "PREFERRED_SOLVERS", "SOLVER", "TIME_LIMIT", "WHY_TENSOR", "Model", "budget", "compared",
           "default_budget", "default_solver", "ensure", "graph", "link", "link_text", "model", "notice", "options_of",
           "pareto_log", "pop_notice", "set_budget", "set_link", "set_model", "set_option", "set_pareto_log",
           "solve_options", "solver", "time_limit"]
