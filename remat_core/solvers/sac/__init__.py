"""Plans in SAC's own terms: which blocks of a traced model's forward are checkpoint regions, and which ops in them
save their outputs, chosen for the budget.

What they share: :mod:`remat_core.solvers.sac_plans` (a plan over the blocks as the ops SAC performs with it) and
the SAC route's own account of memory and recomputation (:mod:`remat_core.schedule.sac_route`): the schedule a
solver here returns is what selective activation checkpointing does with its plan, op for op, so nothing it
plans is refused for SAC's shape and nothing is recomputed that it did not price.

What they guarantee: a schedule the simulator keeps within the budget, or a refusal naming the smallest peak of
the plans they consider (which they then meet); the plan travels in ``solver_info["sac_plan"]`` and is what
``execute --via sac`` and ``rematerialize(via="sac")`` install.
"""
