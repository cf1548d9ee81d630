"""Stage models: Checkmate's grid of stages as an optimisation model, searched by HiGHS or CP-SAT.

What they share: a fixed topological order cut into frontier-advancing stages (:mod:`.grid`: stage
``t`` computes node ``t`` for the first time and may recompute earlier ones), Checkmate's R/S/FREE/U
variables (:mod:`.checkmate_model`), warm starts in stage form (:mod:`.warm_start`), and the quick
portfolio's schedules in any order to compare with (:mod:`remat_core.solvers.quick`).

What they guarantee: ``checkmate-milp`` proves its schedule optimal among the frontier-advancing
schedules of its order when the MIP gap closes; ``checkmate-lp`` gives a lower bound for that class
(its rounding is a heuristic); ``moccasin`` searches retention intervals with CP-SAT. All run to
their time limit; none is ever returned above a quick heuristic's cost (``any_order``).
"""
