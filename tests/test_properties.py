"""Property-based checks of the baselines on random DAGs (every solver's are in ``test_conformance.py``)."""

from hypothesis import given
from strategies import compute_graphs

from remat_core import checkpoint_all_peak, memory_lower_bound, simulate
from remat_core.schedule import checkpoint_all_ops


@given(compute_graphs())
def test_checkpoint_all_is_valid_and_its_peak_is_checkpoint_all_peak(graph):
    ops, reasons = checkpoint_all_ops(graph)
    result = simulate(graph, ops)
    assert result.peak == checkpoint_all_peak(graph)
    assert result.recomputes == 0
    assert set(result.compute_counts) == {graph.ids[i] for i in graph.needed_idx}
    assert len(reasons) == len(ops)
    assert result.memory[-1] == graph.pinned_bytes  # everything freed after its last use


@given(compute_graphs())
def test_lower_bound_never_exceeds_checkpoint_all_peak(graph):
    assert graph.pinned_bytes <= memory_lower_bound(graph) <= checkpoint_all_peak(graph)
