"""Refuse a ``.pt2`` archive that :func:`torch.export.load` would execute code from, before it loads it.

``torch.export.load`` (torch 2.13) runs code from the file on several paths: payloads marked
``use_pickle`` (``torch.load(weights_only=False)``), opaque and custom-object constants
(``pickle.loads``, the TorchScript unpickler), the legacy weight and constant files and the sample
inputs (``torch.load`` falls back to ``weights_only=False`` when the safe load fails), AOTInductor
packages (compiled libraries), and symbolic shapes (``sympy.sympify`` evaluates each expression
string as Python). :func:`check_pt2_archive` reads the archive as a zip, without PyTorch's loader,
and refuses all of these: only the records of a plain ``torch.export.save`` are allowed (JSON,
raw tensor bytes, text), every pickle in it must load with ``weights_only=True`` (so the loader's
safe attempt succeeds and its unsafe fallback never runs), every shape expression must be
arithmetic over symbol names and the shape functions PyTorch prints (with small numbers: sympy
computes constant powers exactly), and every operator the program calls must be a PyTorch operator
(``torch.ops.*``), a symbolic-shape helper or plain arithmetic: the deserialiser resolves any
``torch.`` attribute path, ``torch.os.system`` included. Sizes are bounded before anything is
unpacked, and an archive that cannot be read (damaged, encrypted, nested too deep) is refused too.
"""

from __future__ import annotations

import ast
import io
import json
import re
import zipfile
from typing import Any, Iterator

import torch

from ..errors import TraceError

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

OPERATOR_TARGET = re.compile(r"torch\.ops\.[a-z_][a-z0-9_]*\.[A-Za-z_]\w*(\.[A-Za-z_]\w*)?|torch\._?sym_[a-z_]+"
                             r"|math\.[a-z][a-z0-9_]*"
                             r"|_operator\.(getitem|add|sub|mul|floordiv|truediv|mod|pow|neg|pos|abs|eq|ne|lt|le|gt|ge"
                             r"|and_|or_|xor|not_|invert|lshift|rshift|matmul)")
"""What a node may call (``target``, ``as_operator``): PyTorch operators, ``torch.sym_*`` and ``math``
helpers, and the arithmetic of ``operator`` (not ``operator.call`` or ``methodcaller``)."""
MAX_UNPACKED_BYTES = 2 * 2**30
"""The archive's total unpacked size: PyTorch's loader unpacks every record into memory."""
MAX_JSON_BYTES = 128 * 2**20
"""One JSON record (the program, a payload table): parsed into Python objects several times its size."""
MAX_EXPRESSION_CHARS = 4096
MAX_SHAPE_INTEGER = 2**63
MAX_SHAPE_EXPONENT = 64
POWER_FUNCTIONS = frozenset({"Pow", "PowByNatural", "FloatPow"})

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
        try:
            _check_sizes(archive, what)
            for record, name in _records(archive, what):
                _check_record(archive, record, name, what)
        except TraceError:
            raise
        except Exception as error:  # noqa: BLE001 - a damaged, encrypted or pathological archive: the file's fault
            raise _refuse(what, f"the archive cannot be read ({type(error).__name__}: {error})") from error


def _check_sizes(archive: zipfile.ZipFile, what: str) -> None:
    """Refuse an archive that would unpack to more than :data:`MAX_UNPACKED_BYTES` (a decompression bomb)."""
    total = sum(info.file_size for info in archive.infolist())
    if total > MAX_UNPACKED_BYTES:
        raise _refuse(what, f"it unpacks to {total:,} bytes, over the loader's limit of {MAX_UNPACKED_BYTES:,}")


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
        program = _read_json(archive, name, what)
        _check_shape_expressions(program, record, what)
        _check_operators(program, record, what)
    elif SAMPLE_INPUTS_RECORD.fullmatch(record):
        data = archive.read(name)
        if data:  # torch.export.save writes an empty record for a program saved without sample inputs
            _check_safe_pickle(data, record, what)
    elif match := CONFIG_RECORD.fullmatch(record):
        _check_payload_config(_read_json(archive, name, what), match["kind"], record, what)
    else:
        raise _refuse(what, f"record '{record}' is not part of a plain torch.export.save archive (compiled "
                            f"code, a pickled object or a legacy format would be loaded from it)")


def _read_json(archive: zipfile.ZipFile, name: str, what: str) -> Any:
    size = archive.getinfo(name).file_size
    if size > MAX_JSON_BYTES:
        raise _refuse(what, f"'{name}' is {size:,} bytes of JSON, over the loader's limit of {MAX_JSON_BYTES:,}")
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
    for expression in _values_of(document, "expr_str"):
        if not _is_shape_arithmetic(expression):
            raise _refuse(what, f"'{record}' has a shape expression that is not arithmetic over shape symbols "
                                f"({expression[:80]!r})")


def _check_operators(document: Any, record: str, what: str) -> None:
    """Every operator a node calls or passes (``target``, ``as_operator``) is one of :data:`OPERATOR_TARGET`."""
    for target in (*_values_of(document, "target"), *_values_of(document, "as_operator")):
        if not (isinstance(target, str) and OPERATOR_TARGET.fullmatch(target)):
            raise _refuse(what, f"'{record}' calls {str(target)[:80]!r}, which is not a PyTorch operator")


def _values_of(document: Any, wanted: str) -> Iterator[Any]:
    """The values of every ``wanted`` key, at any depth (not below them)."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key == wanted:
                yield value
            else:
                yield from _values_of(value, wanted)
    elif isinstance(document, list):
        for value in document:
            yield from _values_of(value, wanted)


def _is_shape_arithmetic(expression: Any) -> bool:
    """Whether ``expression`` parses to numbers, names, operators and calls of :data:`SHAPE_FUNCTIONS` only."""
    if not isinstance(expression, str) or len(expression) > MAX_EXPRESSION_CHARS:
        return False
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return all(_is_shape_syntax(node) and _is_small_power(node) for node in ast.walk(tree))


def _is_small_power(node: ast.AST) -> bool:
    """A power's exponent is a shape symbol or a small literal: sympy would compute ``9**9**9`` exactly."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        exponent = node.right
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in POWER_FUNCTIONS:
        exponent = node.args[1] if len(node.args) == 2 else None
    else:
        return True
    if isinstance(exponent, ast.Call) and isinstance(exponent.func, ast.Name) and exponent.args:
        if exponent.func.id == "Symbol":
            return True
        if exponent.func.id == "Integer" and len(exponent.args) == 1:
            exponent = exponent.args[0]
    if isinstance(exponent, ast.Name):
        return True
    if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, ast.USub):
        exponent = exponent.operand
    return isinstance(exponent, ast.Constant) and type(exponent.value) is int and exponent.value <= MAX_SHAPE_EXPONENT


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
        if type(value) is int:
            return abs(value) <= MAX_SHAPE_INTEGER
        return type(value) in (float, bool) or (isinstance(value, str) and len(value) <= 40
                                                and bool(SHAPE_STRING.fullmatch(value)))
    return True
