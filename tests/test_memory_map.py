"""The memory map: every block of a replay drawn where the allocator put it, clickable to its tensor."""

from remat_core import solve
from remat_core.graph import layered_training_chain
from remat_core.schedule import AllocatorConfig, checkpoint_all_peak, replay
from remat_core.viz import memory_map_figure, tensor_color
from remat_core.viz.memory_map import map_layout

MiB = 1 << 20


def test_every_block_is_a_clickable_rectangle_inside_the_stacked_segments():
    graph = layered_training_chain([(3 + i % 4) * MiB for i in range(12)], [1.0] * 12, input_mem=MiB)
    schedule = solve(graph, round(checkpoint_all_peak(graph) * 0.6), "dtr")
    replayed = replay(graph, schedule)
    layout = map_layout(replayed)
    assert layout.total == sum(s.size for s in replayed.segments) == replayed.reserved[-1]
    figure = memory_map_figure(graph, replayed)
    markers = [t for t in figure.data if t.name == "block"]
    clicked = [tuple(d) for t in markers for d in t.customdata]
    assert sorted(clicked) == sorted((b.tensor, b.owner) for b in replayed.blocks)
    for trace in markers:  # one colour per tensor, the same in every schedule; the pinned ones in theirs
        for (tensor, _), color in zip(trace.customdata, trace.marker.color):
            assert color == (tensor_color(tensor) if not graph.node(tensor).pinned else "#7b5ea7")
    top = layout.total / MiB
    for block in replayed.blocks:
        offset = layout.offset_of(block.address)
        assert 0 <= offset and offset + block.size <= layout.total
    assert figure.layout.yaxis.range[1] == top
    names = {t.name for t in figure.data}
    assert {"reserved", "allocated", "fragmentation (%)"} <= names


def test_expandable_segments_draw_as_one_segment():
    graph = layered_training_chain([30 * MiB] * 4, [1.0] * 4, input_mem=MiB)
    replayed = replay(graph, solve(graph, checkpoint_all_peak(graph), "checkpoint-all"),
                      AllocatorConfig(expandable_segments=True))
    layout = map_layout(replayed)
    assert len([s for s in replayed.segments if s.pool == "large"]) == 1 and layout.total == replayed.reserved[-1]
