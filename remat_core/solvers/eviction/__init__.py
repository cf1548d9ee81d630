"""Eviction: run the graph forward and, when memory would pass the budget, free a resident tensor chosen by a
score; recompute it on demand when a later op reads it.

What they share: one walk over a compute order with memory kept exactly; the score is what differs
(DTR's cost / (memory x staleness) and its relatives in :mod:`.dtr`, XLA's largest-first in
:mod:`.greedy_size`); :mod:`.lifetime_split` works offline on the whole compute sequence
(:mod:`.lifetimes`), splitting the lifetimes that cover the over-budget steps.

What they guarantee: a valid schedule within the budget whenever every op's inputs and output fit
(the lower bound), or a refusal naming the smallest budget they were seen to meet. They are quick
(one pass, or a few, per budget) and heuristic: cost is not monotone in the budget.
"""
