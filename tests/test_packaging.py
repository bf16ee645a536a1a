"""Installs everywhere: declared dependencies, requires-python, OpenMP detection, wheel builds."""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: import name -> distribution name, where they differ
DIST_OF = {"sklearn": "scikit-learn", "yaml": "pyyaml"}


def _requirement_names(reqs) -> set[str]:
    """Distribution names, and the extras they pull in ("dask[distributed]" -> dask, distributed)."""
    names = set()
    for req in reqs:
        m = re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", req)
        names.add(m[1].lower())
        names.update(e.strip().lower() for e in (m[2] or "").split(",") if e.strip())
    return names


def _is_require_call(node) -> bool:
    return (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


def third_party_imports(folder: Path) -> dict[str, str]:
    """Top-level third-party module -> a file that imports it (with ``import`` or ``require``)."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            elif _is_require_call(node):            # sim._optional.require("pandas", ...)
                names = [node.args[0].value]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "sim":
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared():
    project = PYPROJECT["project"]
    runtime = _requirement_names(project["dependencies"])
    optional = _requirement_names(r for reqs in project["optional-dependencies"].values() for r in reqs)
    build = _requirement_names(PYPROJECT["build-system"]["requires"])
    imports = third_party_imports(ROOT / "sim")
    assert {"numpy", "threadpoolctl", "pandas"} <= set(imports)   # the scan sees lazy imports too
    missing = {m: f for m, f in imports.items() if DIST_OF.get(m, m).lower() not in runtime | optional}
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
    assert set(third_party_imports(ROOT / "pyext")) <= build


def test_requires_python_is_true_to_the_code():
    spec = PYPROJECT["project"]["requires-python"]
    least = tuple(int(x) for x in re.search(r">=\s*(\d+)\.(\d+)", spec).groups())
    uses_tomllib = any("tomllib" in p.read_text() for p in (ROOT / "sim").rglob("*.py"))
    assert not uses_tomllib or least >= (3, 11), "tomllib is in the standard library from 3.11"
    assert sys.version_info[:2] >= least


def _build_script():
    spec = importlib.util.spec_from_file_location("build_native", ROOT / "pyext" / "build_native.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_openmp_is_detected_and_its_absence_said(monkeypatch):
    build = _build_script()
    monkeypatch.setenv("CC", sys.executable + " -c 'raise SystemExit(1)'")   # a compiler that fails
    with pytest.warns(UserWarning, match="without OpenMP"):
        assert build.openmp_flags() == []
    monkeypatch.setenv("CLUSTERSIM_NO_OPENMP", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build.openmp_flags() == []


def test_wheels_are_configured_for_linux_and_macos():
    cibw = PYPROJECT["tool"]["cibuildwheel"]
    assert "cp311-*" in cibw["build"] and cibw["test-command"]
    assert cibw["linux"]["archs"] and cibw["macos"]["archs"]
