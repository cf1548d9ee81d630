"""The safe .pt2 loader: archives PyTorch's loader would run code from are refused, and nothing runs."""

import io
import json
import pickle
import zipfile

import pytest
import sympy
import torch

from remat_core.errors import TraceError
from remat_core.frontends.pt2_import import parse_pt2
from remat_core.frontends.pt2_safety import check_pt2_archive


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


def flipped_byte(archive: bytes, record_name: str) -> bytes:
    """``archive`` with one byte of a stored (uncompressed) record changed: its CRC no longer matches."""
    data = bytearray(archive)
    at = data.index(record(archive, record_name)[:16])
    data[at] ^= 0xFF
    return bytes(data)


def test_an_unreadable_archive_is_refused_not_an_internal_error():
    archive = exported_linear()
    nested = b"[" * 100_000 + b"]" * 100_000
    for broken in (flipped_byte(archive, "models/model.json"), with_records(archive, {"models/model.json": nested})):
        with pytest.raises(TraceError, match="refused by the safe .pt2 loader: the archive cannot be read"):
            check_pt2_archive(broken, "broken.pt2")


@pytest.mark.parametrize("target", ["torch.os.system", "builtins.exec", "_operator.call", "#custom_op"])
def test_a_program_calling_anything_but_a_pytorch_operator_is_refused(target):
    archive = exported_linear()
    program = record(archive, "models/model.json").decode()
    assert '"target": "torch.ops.aten.linear.default"' in program
    evil = with_records(archive, {"models/model.json": program.replace(
        '"target": "torch.ops.aten.linear.default"', json.dumps({"target": target})[1:-1], 1).encode()})
    with pytest.raises(TraceError, match="which is not a PyTorch operator"):
        check_pt2_archive(evil, "evil.pt2")


@pytest.mark.parametrize("expression", ["9**9**9", "Integer(9)**Integer(9)**Integer(9)",
                                        "Pow(Integer(10), Integer(1000000000000))", "Integer(10)**100000",
                                        "-" * 10_000 + "1", str(2**64)])
def test_a_shape_expression_sympy_would_take_forever_on_is_refused(expression):
    archive = exported_linear(dynamic_shapes=({0: torch.export.Dim.AUTO},))
    program = record(archive, "models/model.json").decode()
    heavy = json.dumps({"as_expr": {"expr_str": expression, "hint": {"as_int": 8}}})
    evil = with_records(archive, {"models/model.json": program.replace('{"as_int": 8}', heavy, 1).encode()})
    with pytest.raises(TraceError, match="shape expression that is not arithmetic"):
        check_pt2_archive(evil, "evil.pt2")


def test_small_powers_of_shapes_are_allowed():
    from remat_core.frontends.pt2_safety import _is_shape_arithmetic
    assert _is_shape_arithmetic("Pow(Symbol('s0', integer=True), Integer(2))")
    assert _is_shape_arithmetic("PowByNatural(Integer(2), Symbol('s1', integer=True))")
    assert _is_shape_arithmetic("s0**2 + 1")


def test_an_archive_too_large_once_unpacked_is_refused(monkeypatch):
    archive = exported_linear()
    monkeypatch.setattr("remat_core.frontends.pt2_safety.MAX_UNPACKED_BYTES", 1000)
    with pytest.raises(TraceError, match="it unpacks to [0-9,]+ bytes, over the loader's limit of 1,000"):
        check_pt2_archive(archive, "big.pt2")
    monkeypatch.setattr("remat_core.frontends.pt2_safety.MAX_UNPACKED_BYTES", 2**30)
    monkeypatch.setattr("remat_core.frontends.pt2_safety.MAX_JSON_BYTES", 100)
    with pytest.raises(TraceError, match="bytes of JSON, over the loader's limit of 100"):
        check_pt2_archive(archive, "big.pt2")


def test_a_program_saved_without_sample_inputs_passes_the_check():
    check_pt2_archive(with_records(exported_linear(), {"data/sample_inputs/model.pt": b""}), "no-inputs.pt2")
