"""The layout stays as ARCHITECTURE.md draws it: packages in data-flow order, imports in one direction, no circles.

Imports are read from the source (every ``import`` anywhere in a module, inside functions too; only
``if TYPE_CHECKING:`` blocks are left out, as they never run), plus the names a package face loads
on first use (its ``_LAZY_IMPORTS`` table).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("remat_core", "explorer")

ALLOWED = {
    "errors": set(),
    "graph": {"errors"},
    "frontends": {"errors", "graph"},
    "schedule": {"errors", "graph"},
    "decompose": {"errors", "graph"},
    "solvers": {"errors", "graph", "schedule", "decompose"},
    "analysis": {"errors", "graph", "schedule", "decompose", "solvers"},
    "viz": {"errors", "graph", "schedule", "decompose", "analysis"},
    "run": {"errors", "graph", "schedule", "frontends", "solvers", "store"},
    "store": {"errors", "graph", "schedule", "solvers", "analysis"},
    "batch": {"errors", "graph", "frontends", "schedule", "solvers", "analysis", "viz", "store"},
    "cli": {"errors", "graph", "frontends", "schedule", "decompose", "solvers", "analysis", "viz", "run", "store",
            "batch"},
}
"""Which packages each package of remat_core may import (ARCHITECTURE.md draws the same arrows)."""
MAX_TOP_LEVEL = 12

SOLVER_SHARED = {"registry", "front_door", "outcome", "quick", "deadline", "bounds", "checkpoint_all", "retry", "sac_plans"}
"""The modules directly in ``remat_core.solvers`` that every family may use (the registry, the front door, the
outcome, the quick portfolio, deadlines, bounds and the baseline); they import no family."""
SOLVER_FAMILIES_IMPORTED_BY = {"portfolio": {"eviction", "stage_models"}}
"""The one family that draws on others by importing them: ``auto`` runs lifetime splitting and the MILP itself."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


class _Imports(ast.NodeVisitor):
    """Every module a source file imports, resolved to absolute names, TYPE_CHECKING blocks left out."""

    def __init__(self, name: str, is_package: bool) -> None:
        self.package = name if is_package else name.rpartition(".")[0]
        self.found: set[str] = set()

    def _absolute(self, level: int, module: str | None) -> str:
        if not level:
            return module or ""
        base = self.package.split(".")[:len(self.package.split(".")) - level + 1]
        return ".".join(base + ([module] if module else []))

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
                (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = self._absolute(node.level, node.module)
        self.found.add(module)
        self.found.update(f"{module}.{alias.name}" for alias in node.names)  # submodules imported by name

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, ast.Name) and t.id == "_LAZY_IMPORTS" for t in node.targets):
            for value in ast.literal_eval(node.value).values():
                self.found.add(self._absolute(len(value) - len(value.lstrip(".")), value.lstrip(".")))
        self.generic_visit(node)


def import_graph() -> nx.DiGraph:
    modules = source_modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        visitor = _Imports(name, path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(), str(path)))
        graph.add_edges_from((name, target) for target in visitor.found if target in modules and target != name)
    return graph


@pytest.fixture(scope="module")
def imports() -> nx.DiGraph:
    return import_graph()


def test_no_module_imports_itself_through_a_circle(imports):
    cycles = list(nx.simple_cycles(imports))
    assert not cycles, "import circles (break each by moving the shared piece down a package):\n" + "\n".join(
        " -> ".join([*c, c[0]]) for c in cycles[:10])


def test_remat_core_packages_import_only_the_packages_below_them(imports):
    wrong = []
    for source, target in imports.edges:
        a, b = source.split("."), target.split(".")
        if a[0] != "remat_core" or b[0] != "remat_core" or len(a) < 2 or len(b) < 2 or a[1] == b[1] \
                or a[1] == "__main__":
            continue
        if a[1] not in ALLOWED:
            wrong.append(f"{source}: package {a[1]!r} is not in the layout (add it to ALLOWED and ARCHITECTURE.md)")
        elif b[1] not in ALLOWED[a[1]]:
            wrong.append(f"{source} imports {target}: {a[1]} may import only {sorted(ALLOWED[a[1]])}")
    assert not wrong, "\n".join(wrong)


def test_remat_core_has_at_most_twelve_top_level_entries():
    entries = sorted(p.name for p in (ROOT / "remat_core").iterdir()
                     if p.name != "__pycache__" and not (p.name.startswith("__") and p.name.endswith("__.py")))
    assert len(entries) <= MAX_TOP_LEVEL, entries
    packages = {p.removesuffix(".py") for p in entries}
    assert packages == set(ALLOWED), f"the layout names {sorted(ALLOWED)}; remat_core holds {sorted(packages)}"


def test_every_package_says_its_job_and_exports_what_other_packages_use(imports):
    modules = source_modules()
    missing = []
    for name, path in modules.items():
        if path.name != "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        if not ast.get_docstring(tree):
            missing.append(f"{name}: no docstring saying what comes in, what goes out and what it may import")
    assert not missing, "\n".join(missing)
    package_faces = {f"remat_core.{p}" for p in ALLOWED if (ROOT / "remat_core" / p).is_dir()} - {"remat_core.cli"}
    for face in sorted(package_faces):
        module = __import__(face, fromlist=["__all__"])
        assert hasattr(module, "__all__"), f"{face} has no __all__"
        for exported in module.__all__:
            assert hasattr(module, exported), f"{face}.__all__ names {exported!r}, which it does not define"


def test_what_other_packages_import_from_a_face_is_in_its_all():
    """``from remat_core.graph import X`` in another package: X is in ``remat_core.graph.__all__``."""
    modules = source_modules()
    faces = {f"remat_core.{p}" for p in ALLOWED if (ROOT / "remat_core" / p).is_dir()}
    unlisted = []
    for name, path in [*modules.items(), *((module_name(p), p) for p in (ROOT / "pages").glob("*.py"))]:
        visitor = _Imports(name, path.name == "__init__.py")
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = visitor._absolute(node.level, node.module)
            if target not in faces or name == target or name.startswith(target + "."):
                continue
            listed = set(__import__(target, fromlist=["__all__"]).__all__)
            unlisted += [f"{name} imports {alias.name} from {target}" for alias in node.names
                         if alias.name not in listed and not alias.name.startswith("_")
                         and f"{target}.{alias.name}" not in modules]
    assert not unlisted, "add these to the face's __all__:\n" + "\n".join(unlisted)


def test_importing_remat_core_loads_neither_torch_nor_streamlit_nor_ray():
    """Nor does building the command line's parser: a command on a graph file starts without loading PyTorch."""
    code = ("import sys, remat_core, remat_core.cli, remat_core.viz, remat_core.analysis, remat_core.run; "
            "remat_core.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'streamlit', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_remat_core_never_imports_the_app(imports):
    offenders = [(s, t) for s, t in imports.edges if s.startswith("remat_core") and t.split(".")[0] == "explorer"]
    assert not offenders
    for path in (ROOT / "remat_core").rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
        assert not {m for m in names if m.split(".")[0] == "streamlit"}, f"{path} imports Streamlit"


def test_solver_families_use_the_shared_pieces_and_not_each_other(imports):
    """A family imports the shared modules of ``remat_core.solvers`` (and its own modules); only the portfolio
    imports other families; the shared modules import no family (the quick portfolio finds its members by tag)."""
    families = {p.name for p in (ROOT / "remat_core" / "solvers").iterdir() if (p / "__init__.py").exists()}
    wrong = []
    for source, target in imports.edges:
        a, b = source.split("."), target.split(".")
        if a[:2] != ["remat_core", "solvers"] or b[:2] != ["remat_core", "solvers"] or len(a) < 3 or len(b) < 3:
            continue
        if a[2] == b[2]:
            continue
        if a[2] in SOLVER_SHARED and b[2] in families:
            wrong.append(f"{source} imports {target}: the shared solver modules import no family")
        elif a[2] in families and b[2] in families and b[2] not in SOLVER_FAMILIES_IMPORTED_BY.get(a[2], set()):
            wrong.append(f"{source} imports {target}: families share code through the shared modules "
                         f"({', '.join(sorted(SOLVER_SHARED))})")
    assert not wrong, "\n".join(wrong)
    for family in families:
        doc = ast.get_docstring(ast.parse((ROOT / "remat_core" / "solvers" / family / "__init__.py").read_text()))
        assert doc and "share" in doc and "guarantee" in doc, f"solvers.{family} must say what its solvers share and guarantee"
