"""Separators: the recursion of Kumar et al. ("Efficient Rematerialization for Deep Networks", NeurIPS 2019)
over a separator hierarchy of a tree or path decomposition.

What they share: :mod:`.recursion` (the hierarchy, the recursion ``remat(X, keep, touch)``, its
proved bounds, and the budget-aware plans built around it), each solver building its hierarchy
from a decomposition (:mod:`remat_core.decompose`), and :mod:`.trace` (the recursion recorded call
by call, for the Learn page).

What they guarantee: the pure recursion stays within :func:`.recursion.pure_bounds` (memory from
the decomposition's width and the separator tree's height, O(log n) computations per node for
``treewidth``); budget-aware runs return the cheapest fitting schedule of every source they have
(their recursion, the pure one, checkpoint-all with eviction, the quick portfolio as fallback).
"""
