"""The graph package: what every later package reads.

In: files and generators. Out: :class:`ComputeGraph` (an immutable, validated DAG of tensors with
sizes, costs and kinds), its readers and writers (``remat-graph`` JSON, Checkmate/Moccasin
node-link JSON), the labels people read (unique names, never ids), budgets as text, cost-model
names, synthetic graphs, and the reverse-mode pass that turns a forward graph into a training
graph, and the graph with each kernel's transient bytes as a workspace node (how solvers see them); what a traced
graph carries beside itself (:class:`Attachments`).
Imports only :mod:`remat_core.errors`.
"""

from .attachments import SIZES, TRACED, Attachments
from .backward import with_backward
from .budget import budget_text, format_bytes, parse_budget
from .compute_graph import MAX_GRAPH_BYTES, MAX_NODE_BYTES, MAX_NODE_COST, NODE_KINDS, ComputeGraph, Node
from .cost_models import COST_MODELS, DEFAULT_REPEATS, FLOPS_PER_BYTE
from .generators import LAYER_ORDERS, chain, k_tree, layered_training_chain, random_dag, random_layered, training_chain
from .io import (GRAPH_FILE_FORMATS, load_graph, parse_graph, parse_json_text, register_graph_loader,
                 registered_graph_suffixes, save_graph)
from .labels import node_by_label, node_label, node_labels
from .workspaces import WORKSPACE_SUFFIX, with_workspaces, without_workspaces

__all__ = ["Attachments", "budget_text", "chain", "ComputeGraph", "COST_MODELS", "DEFAULT_REPEATS", "FLOPS_PER_BYTE",
           "format_bytes", "GRAPH_FILE_FORMATS", "k_tree", "LAYER_ORDERS", "layered_training_chain", "load_graph",
           "MAX_GRAPH_BYTES", "MAX_NODE_BYTES", "MAX_NODE_COST", "Node", "node_by_label", "node_label",
           "node_labels", "NODE_KINDS", "parse_budget", "parse_graph", "parse_json_text", "random_dag",
           "random_layered", "register_graph_loader", "registered_graph_suffixes", "save_graph", "SIZES", "TRACED", "training_chain",
           "with_backward", "with_workspaces", "without_workspaces", "WORKSPACE_SUFFIX"]
