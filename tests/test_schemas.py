"""The JSON Schemas under docs/ describe what the package writes."""

import json
from pathlib import Path

import jsonschema
import pytest

from remat_core import solve
from remat_core.graph.generators import random_dag, training_chain

DOCS = Path(__file__).resolve().parent.parent / "docs"


def schema(name):
    return json.loads((DOCS / name).read_text())


@pytest.mark.parametrize("graph", [training_chain(4), random_dag(12, seed=3)])
def test_written_graphs_match_the_schema(graph):
    jsonschema.validate(graph.to_json(), schema("remat-graph.schema.json"))


def test_written_schedules_match_the_schema():
    g = training_chain(4)
    jsonschema.validate(solve(g, 10**6).to_json(), schema("remat-schedule.schema.json"))


def test_schema_rejects_a_negative_mem():
    doc = training_chain(2).to_json()
    doc["nodes"][1]["mem"] = -1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema("remat-graph.schema.json"))
