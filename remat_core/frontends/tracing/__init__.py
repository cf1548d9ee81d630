"""The tracer's passes: capture a joint graph, turn it into a ComputeGraph, cost it, coarsen it.

:mod:`remat_core.frontends.trace` is the front door; the modules here each do one step:

- :mod:`.capture`: one training step -> ATen-level joint forward+backward FX graph (FakeTensors),
  every op annotated with the ``nn.Module`` call it ran in;
- :mod:`.costs`: the cost models (``flops``, ``unit``, ``bytes``, ``measured``);
- :mod:`.to_graph`: FX graph -> op-level :class:`~remat_core.graph.compute_graph.ComputeGraph`, views merged
  into their storage owners;
- :mod:`.coarsen`: op level -> module level (one node per module call per pass).
"""
