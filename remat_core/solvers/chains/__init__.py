"""Chains: the graph cut into a chain of links (cut vertices or a linearisation), then checkpoints chosen along
it by a formula or a dynamic program (Chen's sqrt(n) and greedy segments, Griewank's revolve, Rotor).

What they share: :mod:`.chain` (links, their boundaries, tapes and measured figures), :mod:`.plans`
(plan trees turned into computations with reasons) and :mod:`.plan_table` (the dynamic program over
sub-chains and memory levels, read at a budget).

What they guarantee: on a true chain Rotor is optimal for heterogeneous links and Griewank for unit
ones; on other graphs the chain is an approximation and the simulator has the last word. Quick: a
table is built once per graph (``graph.memo``) and read at each budget.
"""
