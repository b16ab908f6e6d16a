"""The package's layers: each imports only from the layers before it, and nothing cycles.

The order is the pipeline's (autopass_build.LAYERS, drawn in docs/architecture.md).  `capture/` runs inside every compile of a
user's build, so it may import only `core/` and itself (its start-up cost is pinned by
test_wrapper's import test as well).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autopass_build import LAYERS

PACKAGE = Path(__file__).resolve().parents[1] / "autopass_build"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path, name: str) -> set[str]:
    """Every autopass_build module `path` imports, at any depth of its code."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("autopass_build"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not base.startswith("autopass_build"):
                continue
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    modules = _modules()
    return {m for m in found if m in modules}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_module_lives_in_a_layer():
    loose = [m for m in _modules() if m != "autopass_build" and _layer(m) is None]
    assert loose == []


@pytest.mark.parametrize("module", sorted(_modules()))
def test_imports_run_down_the_layers_only(module):
    own = _layer(module)
    if own is None:
        return  # the package's own __init__: a version string, no imports
    rank = LAYERS.index(own)
    allowed = set(LAYERS[:rank + 1])
    if own == "capture":
        allowed = {"core", "capture"}
    upward = sorted(m for m in _imports(_modules()[module], module)
                    if _layer(m) is not None and _layer(m) not in allowed)
    assert upward == [], f"{module} ({own}) imports from a later layer: {upward}"


def test_no_import_cycles_between_modules():
    modules = _modules()
    graph = {m: {i for i in _imports(p, m) if i != m and not m.startswith(i + ".")}
             for m, p in modules.items()}
    for m in graph:  # a package's __init__ is reached through its modules: not an edge back
        graph[m] = {i for i in graph[m] if not (modules[i].name == "__init__.py"
                                                 and m.startswith(i + "."))}
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> None:
        if node in done:
            return
        assert node not in visiting, "import cycle: " + " -> ".join(
            visiting[visiting.index(node):] + [node])
        visiting.append(node)
        for nxt in sorted(graph[node]):
            visit(nxt)
        visiting.pop()
        done.add(node)

    for module in sorted(graph):
        visit(module)


def test_the_checker_sees_an_upward_import(tmp_path):
    """The scanner itself: a function-level import from a later layer is found."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from autopass_build.cli import main\n")
    assert "autopass_build.cli" in _imports(source, "autopass_build.core.m")


def test_only_the_cluster_package_imports_ray():
    """Ray is an extra (`pip install 'autopass[cluster]'`): no module outside
    autopass_build/cluster may import it, at any depth, so a local run never needs it."""
    importers = []
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "ray" or n.startswith("ray.") for n in names):
                importers.append(name)
    assert importers and all(m.startswith("autopass_build.cluster") for m in importers), \
        importers


def test_a_local_tune_run_never_loads_ray():
    """The tuner's modules import without Ray (it is imported inside cluster/ only when
    a run names a cluster)."""
    import subprocess
    import sys

    code = ("import sys; import autopass_build.tuning.tuner, autopass_build.cli.tune; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_a_cluster_run_without_ray_says_how_to_install_it_before_anything_runs():
    """A run that names a cluster on a machine without Ray is refused at its start (the
    reachability check), with the install line: not after the stages' hours.  Ray is
    hidden from a child interpreter as an uninstalled module is (sys.modules[...] = None)."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['ray'] = None\n"
            "from autopass_build.cluster.connect import ClusterError, check_reachable\n"
            "try:\n    check_reachable('127.0.0.1:1', 0.1)\n"
            "except ClusterError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "a cluster run needs Ray: pip install 'autopass[cluster]'", out


def test_no_two_classes_share_a_name():
    """Issue 62: one name, one thing (two `Entry`, two `Winner`, two `Side` were)."""
    names: dict[str, list[str]] = {}
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names.setdefault(node.name, []).append(name)
    assert {k: v for k, v in names.items() if len(v) > 1} == {}
