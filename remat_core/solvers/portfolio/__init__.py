"""Portfolio: ``auto``, the default solver, which runs the others and keeps the best schedule it finds in the
time limit.

What its solvers share: proofs (the peak lower bound, checkpoint-all, :mod:`.exhaustive` search on tiny
graphs), the quick portfolio (:mod:`remat_core.solvers.quick`), a large-neighbourhood search over
compute sequences, and Checkmate's MILP from the best schedule on graphs small enough.

What it guarantees: never above any quick heuristic at the same budget; optimal when a proof says
so (``solver_info`` names the winner, every phase and the gap to its lower bound).
"""
