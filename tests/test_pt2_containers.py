"""A ``.pt2`` whose output is a container only its package registers with pytree (a Hugging Face ``ModelOutput``).

``torch.export.load`` cannot rebuild the output spec of such a program until the package defining the type is
imported; the loader imports it (for Hugging Face's types), and otherwise names the type and the fix.
"""

import subprocess
import sys
import textwrap

import pytest
import torch

from remat_core.errors import TraceError
from remat_core.frontends import pt2_import


def test_a_hugging_face_classifier_exported_here_loads_in_a_process_that_never_imported_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64)
    model = transformers.BertForSequenceClassification(config).eval()
    ids = torch.randint(0, 200, (2, 16))
    path = tmp_path / "bert.pt2"
    torch.export.save(torch.export.export(model, (ids,)), path)
    script = textwrap.dedent(f"""
        import sys
        from remat_core.frontends.pt2_import import load_pt2
        assert "transformers" not in sys.modules
        graph = load_pt2({str(path)!r})
        print("ok", len(graph.nodes), "transformers.modeling_outputs" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok") and done.stdout.split()[-1] == "True"


def test_an_unregistered_container_of_another_package_is_named_with_the_fix(monkeypatch):
    def refuse(_):
        raise KeyError("Deserializing mypackage.outputs.Result in pytree is not registered.")

    monkeypatch.setattr(pt2_import, "check_pt2_archive", lambda data, what: None)
    monkeypatch.setattr(torch.export, "load", refuse)
    with pytest.raises(TraceError, match="output is a mypackage.outputs.Result, a container type this process has "
                                         "not registered") as raised:
        pt2_import.parse_pt2(b"archive", name="result.pt2")
    assert "import the package that defines mypackage.outputs" in str(raised.value)
