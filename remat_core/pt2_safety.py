"""Refuse a ``.pt2`` archive that :func:`torch.export.load` would execute code from, before it loads it.

``torch.export.load`` (torch 2.13) runs code from the file on several paths: payloads marked
``use_pickle`` (``torch.load(weights_only=False)``), opaque and custom-object constants
(``pickle.loads``, the TorchScript unpickler), the legacy weight and constant files and the sample
inputs (``torch.load`` falls back to ``weights_only=False`` when the safe load fails), AOTInductor
packages (compiled libraries), and symbolic shapes (``sympy.sympify`` evaluates each expression
string as Python). :func:`check_pt2_archive` reads the archive as a zip, without PyTorch's loader,
and refuses all of these: only the records of a plain ``torch.export.save`` are allowed (JSON,
raw tensor bytes, text), every pickle in it must load with ``weights_only=True`` (so the loader's
safe attempt succeeds and its unsafe fallback never runs), and every shape expression must be
arithmetic over symbol names and the shape functions PyTorch prints.
"""

from __future__ import annotations

import ast
import io
import json
import re
import zipfile
from typing import Any, Iterator

import torch

from .errors import TraceError

PLAIN_RECORDS = re.compile(r"archive_format|archive_version|byteorder|\.data/version|\.data/serialization_id"
                           r"|extra/.+|data/weights/weight_\d+|data/constants/tensor_\d+")
"""Records read as text or raw tensor bytes, never unpickled."""
MODEL_RECORD = re.compile(r"models/(?P<model>[\w.-]+)\.json")
SAMPLE_INPUTS_RECORD = re.compile(r"data/sample_inputs/(?P<model>[\w.-]+)\.pt")
CONFIG_RECORD = re.compile(r"data/(?P<kind>weights|constants)/(?P<model>[\w.-]+)_(?P=kind)_config\.json")
PAYLOAD_NAME = {"weights": re.compile(r"weight_\d+"), "constants": re.compile(r"tensor_\d+")}
"""The payload files a config may name: raw tensors only (no ``custom_obj_`` or ``opaque_obj_``)."""

SHAPE_FUNCTIONS = frozenset({
    # the deserialiser's own shape functions
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt", "FloorToInt", "CeilDiv",
    "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv", "IsNonOverlappingAndDenseIndicator",
    "TruncToFloat", "TruncToInt", "RoundToInt", "RoundDecimal", "ToFloat", "Identity",
    # the sympy classes its printer (srepr) writes
    "Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "Max", "Min", "Abs", "floor", "ceiling",
    "Equality", "Unequality", "StrictLessThan", "LessThan", "StrictGreaterThan", "GreaterThan", "And", "Or", "Not",
    "BooleanTrue", "BooleanFalse", "Piecewise", "ExprCondPair", "Tuple", "Zero", "One", "NegativeOne", "Half",
    "Infinity", "NegativeInfinity", "IntInfinity", "NegativeIntInfinity", "NaN"})
"""Functions a shape expression may call (``Add(Symbol('s0', integer=True), Integer(1))``)."""
SHAPE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*|oo|zoo|nan|int_oo")
"""Bare names: shape symbols (``s0``, ``u3``), constants; never a dunder."""
SHAPE_STRING = re.compile(r"[A-Za-z][A-Za-z0-9_]*|[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
"""String arguments (``Symbol('s77')``, ``Float('0.5')``): a name or a number, nothing sympy would run."""
SHAPE_SYNTAX = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.keyword, ast.Name,
                ast.Load, ast.Constant, ast.Tuple, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
"""Arithmetic, comparisons, calls and constants only: no attributes, subscripts or lambdas."""

SAVE_HINT = "export and save it with torch.export.save(torch.export.export(model, example_inputs), path)"


def check_pt2_archive(data: bytes, what: str) -> None:
    """Raise :class:`TraceError` unless ``data`` is a ``.pt2`` archive that loads without running its code.

    Parameters
    ----------
    data : bytes
        The whole file.
    what : str
        Names the file in messages.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as error:
        raise TraceError(what, f"not a loadable torch.export program (not a zip archive: {error})",
                         hint=SAVE_HINT) from error
    with archive:
        for record, name in _records(archive, what):
            _check_record(archive, record, name, what)


def _refuse(what: str, reason: str) -> TraceError:
    """The one message for a refused archive: what was found, and that nothing of it ran."""
    return TraceError(what, f"refused by the safe .pt2 loader: {reason}; nothing in the file was run",
                      hint=SAVE_HINT)


def _records(archive: zipfile.ZipFile, what: str) -> Iterator[tuple[str, str]]:
    """``(record, zip entry name)`` of every entry: all under one root folder (PyTorch's reader sees only
    the first entry's folder), no name twice (readers disagree on which copy counts)."""
    names = archive.namelist()
    if not names:
        raise _refuse(what, "the archive is empty")
    if len(set(names)) != len(names):
        raise _refuse(what, "the archive holds two entries with the same name")
    root = names[0].split("/", 1)[0] + "/"
    for name in names:
        if not name.startswith(root) or name == root:
            raise _refuse(what, f"entry '{name}' lies outside the archive's folder '{root}'")
        yield name[len(root):], name


def _check_record(archive: zipfile.ZipFile, record: str, name: str, what: str) -> None:
    """Allow one record of a plain ``torch.export.save`` archive, after checking what PyTorch would run of it."""
    if PLAIN_RECORDS.fullmatch(record):
        return
    if MODEL_RECORD.fullmatch(record):
        _check_shape_expressions(_read_json(archive, name, what), record, what)
    elif SAMPLE_INPUTS_RECORD.fullmatch(record):
        _check_safe_pickle(archive.read(name), record, what)
    elif match := CONFIG_RECORD.fullmatch(record):
        _check_payload_config(_read_json(archive, name, what), match["kind"], record, what)
    else:
        raise _refuse(what, f"record '{record}' is not part of a plain torch.export.save archive (compiled "
                            f"code, a pickled object or a legacy format would be loaded from it)")


def _read_json(archive: zipfile.ZipFile, name: str, what: str) -> Any:
    try:
        return json.loads(archive.read(name))
    except (ValueError, UnicodeDecodeError) as error:
        raise _refuse(what, f"'{name}' is not JSON ({error})") from error


def _check_safe_pickle(data: bytes, record: str, what: str) -> None:
    """Refuse a pickle that ``torch.load(weights_only=True)`` rejects: PyTorch's loader would retry it unsafely."""
    try:
        torch.load(io.BytesIO(data), weights_only=True)
    except Exception as error:  # noqa: BLE001 - any failure of the safe load means the unsafe retry would run
        raise _refuse(what, f"'{record}' is a pickle that only loads by running code from the file "
                            f"({type(error).__name__})") from error


def _check_payload_config(config: Any, kind: str, record: str, what: str) -> None:
    """Every payload a weights or constants config names is raw tensor bytes, never a pickle."""
    entries = config.get("config") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        raise _refuse(what, f"'{record}' has no payload table")
    for key, payload in entries.items():
        if not isinstance(payload, dict) or payload.get("use_pickle") is not False \
                or not PAYLOAD_NAME[kind].fullmatch(str(payload.get("path_name"))):
            raise _refuse(what, f"'{record}' stores {kind[:-1]} '{key}' as a pickled or custom object")


def _check_shape_expressions(document: Any, record: str, what: str) -> None:
    """Every ``expr_str`` of the program (sympy evaluates them as Python) is plain shape arithmetic."""
    for expression in _expression_strings(document):
        if not _is_shape_arithmetic(expression):
            raise _refuse(what, f"'{record}' has a shape expression that is not arithmetic over shape symbols "
                                f"({expression[:80]!r})")


def _expression_strings(document: Any) -> Iterator[Any]:
    """The values of every ``expr_str`` key, at any depth."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "expr_str":
                yield value
            else:
                yield from _expression_strings(value)
    elif isinstance(document, list):
        for value in document:
            yield from _expression_strings(value)


def _is_shape_arithmetic(expression: Any) -> bool:
    """Whether ``expression`` parses to numbers, names, operators and calls of :data:`SHAPE_FUNCTIONS` only."""
    if not isinstance(expression, str):
        return False
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError):
        return False
    return all(_is_shape_syntax(node) for node in ast.walk(tree))


def _is_shape_syntax(node: ast.AST) -> bool:
    """One node of a shape expression: allowed syntax, a known function called, a plain name or literal."""
    if not isinstance(node, SHAPE_SYNTAX):
        return False
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in SHAPE_FUNCTIONS
    if isinstance(node, ast.Name):
        return bool(SHAPE_NAME.fullmatch(node.id))
    if isinstance(node, ast.Constant):
        value = node.value
        return type(value) in (int, float, bool) or (isinstance(value, str) and bool(SHAPE_STRING.fullmatch(value)))
    return True
