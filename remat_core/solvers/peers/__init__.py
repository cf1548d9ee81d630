"""Peers: other systems' rematerialization, run as they run there, so that ours can be compared with theirs.

What they share: nothing of ours but the registry; each answers in its own terms (a budget fraction,
not bytes), so its solver searches that knob and the simulator judges the result.
``torch-partitioner`` is PyTorch's own min-cut partitioner under ``activation_memory_budget`` (on a
traced model's joint FX graph when the graph has one).

What they guarantee: nothing beyond a valid schedule within the budget (judged by our simulator);
they are not part of the quick portfolio.
"""
