"""The safe .pt2 loader: archives PyTorch's loader would run code from are refused, and nothing runs."""

import io
import json
import pickle
import zipfile

import pytest
import sympy
import torch

from remat_core.errors import TraceError
from remat_core.pt2_import import parse_pt2
from remat_core.pt2_safety import check_pt2_archive


class OpensForWriting:
    """A pickle payload: unpickling it calls ``open(marker, "w")``, which creates the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def exported_linear(**export_options) -> bytes:
    """A plain ``torch.export.save`` archive of a small linear model."""
    torch.manual_seed(0)
    buffer = io.BytesIO()
    torch.export.save(torch.export.export(torch.nn.Linear(4, 3), (torch.randn(8, 4),), **export_options), buffer)
    return buffer.getvalue()


def with_records(archive: bytes, changes: dict[str, bytes | None]) -> bytes:
    """``archive`` with records replaced, added, or (None) removed; record names are relative to its folder."""
    source = zipfile.ZipFile(io.BytesIO(archive))
    root = source.namelist()[0].split("/", 1)[0]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            record = name.split("/", 1)[1]
            if record not in changes:
                target.writestr(name, source.read(name))
        for record, data in changes.items():
            if data is not None:
                target.writestr(f"{root}/{record}", data)
    return out.getvalue()


def record(archive: bytes, name: str) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(archive))
    return source.read(f"{source.namelist()[0].split('/', 1)[0]}/{name}")


def pickled_sample_inputs(archive, marker):
    return {"data/sample_inputs/model.pt": pickle.dumps(OpensForWriting(marker), protocol=2)}


def pickled_weight(archive, marker):
    config = json.loads(record(archive, "data/weights/model_weights_config.json"))
    config["config"]["bias"]["use_pickle"] = True
    path = config["config"]["bias"]["path_name"]
    return {"data/weights/model_weights_config.json": json.dumps(config).encode(),
            f"data/weights/{path}": pickle.dumps(OpensForWriting(marker), protocol=2)}


def opaque_constant(archive, marker):
    config = {"config": {"c": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True,
                               "tensor_meta": None}}}
    return {"data/constants/model_constants_config.json": json.dumps(config).encode(),
            "data/constants/opaque_obj_0": pickle.dumps(OpensForWriting(marker), protocol=2)}


def legacy_weights(archive, marker):
    return {"data/weights/model.pt": pickle.dumps(OpensForWriting(marker), protocol=2)}


def compiled_package(archive, marker):
    return {"data/aotinductor/model/model.so": b"\x7fELF"}


def shape_expression(archive, marker):
    program = record(archive, "models/model.json").decode()
    evil = json.dumps({"as_expr": {"expr_str": f"__import__('builtins').open({str(marker)!r}, 'w') and 8",
                                   "hint": {"as_int": 8}}})
    return {"models/model.json": program.replace('{"as_int": 8}', evil, 1).encode()}


ATTACKS = [pickled_sample_inputs, pickled_weight, opaque_constant, legacy_weights, compiled_package, shape_expression]


def test_the_payloads_run_when_unpickled_or_sympified(tmp_path):
    """The attacks are live: the loader's unsafe paths (pickle, sympify) would run them."""
    pickle.loads(pickle.dumps(OpensForWriting(tmp_path / "pickled"), protocol=2))
    sympy.sympify(f"__import__('builtins').open({str(tmp_path / 'sympified')!r}, 'w') and 8")
    assert (tmp_path / "pickled").exists() and (tmp_path / "sympified").exists()


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.__name__)
def test_an_archive_the_loader_would_run_code_from_is_refused_and_nothing_runs(attack, tmp_path):
    marker = tmp_path / "ran"
    archive = exported_linear()
    evil = with_records(archive, attack(archive, marker))
    with pytest.raises(TraceError, match="refused by the safe .pt2 loader: .*; nothing in the file was run"):
        parse_pt2(evil, name="evil.pt2")
    assert not marker.exists()


def appended(archive: bytes, name: str) -> bytes:
    """``archive`` with one more zip entry, named ``name`` as given (not under the archive's folder)."""
    source = zipfile.ZipFile(io.BytesIO(archive))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for entry in source.namelist():
            target.writestr(entry, source.read(entry))
        target.writestr(name, b"{}")
    return out.getvalue()


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_an_archive_with_an_entry_outside_its_folder_or_one_twice_is_refused():
    archive = exported_linear()
    model = next(n for n in zipfile.ZipFile(io.BytesIO(archive)).namelist() if n.endswith("models/model.json"))
    for name, reason in (("elsewhere/models/model.json", "outside the archive's folder"),
                         (model, "two entries with the same name")):
        with pytest.raises(TraceError, match=reason):
            check_pt2_archive(appended(archive, name), "evil.pt2")


def test_plain_and_dynamic_shape_exports_still_load():
    assert len(parse_pt2(exported_linear(), name="linear")) > 0
    batch = torch.export.Dim.AUTO
    dynamic = exported_linear(dynamic_shapes=({0: batch},))
    assert b"Symbol(" in record(dynamic, "models/model.json")  # shape expressions, checked and allowed
    assert {n.kind for n in parse_pt2(dynamic, name="dynamic").nodes} >= {"param", "forward", "backward"}


def test_a_damaged_archive_is_a_trace_error_not_a_crash():
    damaged = with_records(exported_linear(), {"data/weights/model_weights_config.json": None})
    with pytest.raises(TraceError, match="not a loadable torch.export program"):
        parse_pt2(damaged, name="damaged.pt2")
