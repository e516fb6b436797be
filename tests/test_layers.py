"""The import rules of docs/architecture.md, checked on the source (AST), so a wrong import
fails here before it becomes a cycle that only shows at run time.

Every import counts, also those inside functions and under ``TYPE_CHECKING``: a lazy import
hides a dependency, it does not remove it. ``core/_moved.py`` names old module paths as
strings only and is not an import.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "airflow_hudi_occ"
ROOT = "airflow_hudi_occ"

#: core's layers, bottom first; a module may import its own layer and those below it
CORE_LAYERS = [
    {"errors", "config", "plugins", "job_protocol", "_moved", "__init__"},
    {"format"},
    {"table"},
    {"concurrency"},
    {"commit"},
    {"services"},
    {"inspection"},
]
#: what each top-level part may never import
FORBIDDEN = {
    "core": ("airflow_hudi_occ.spark", "airflow_hudi_occ.provider", "airflow_hudi_occ.cli",
             "airflow_hudi_occ.testing", "airflow_hudi_occ.demo", "pyspark", "airflow"),
    "spark": ("airflow_hudi_occ.provider", "airflow_hudi_occ.cli", "airflow"),
    "cli": ("airflow_hudi_occ.spark", "airflow_hudi_occ.provider", "pyspark", "airflow"),
}


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: pathlib.Path, text: str | None = None) -> list[tuple[int, str, bool]]:
    """(line, imported module, at module level?) for every import in the file."""
    tree = ast.parse(path.read_text() if text is None else text, str(path))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    top_level = {id(n) for n in tree.body}
    for node in tree.body:  # `if TYPE_CHECKING:` and try/except blocks at module level
        if isinstance(node, (ast.If, ast.Try)):
            top_level |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, id(node) in top_level) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target, id(node) in top_level))
            # `from pkg import module` imports the module
            for a in node.names:
                if (PKG.parent / (target.replace(".", "/") + "/" + a.name + ".py")).exists() or \
                        (PKG.parent / target.replace(".", "/") / a.name / "__init__.py").exists():
                    out.append((node.lineno, f"{target}.{a.name}", id(node) in top_level))
    return out


def sources():
    return sorted(p for p in PKG.rglob("*.py") if p.name != "_moved.py")


def core_layer(mod: str) -> int | None:
    parts = mod.split(".")
    if parts[:2] != [ROOT, "core"]:
        return None
    first = parts[2] if len(parts) > 2 else "__init__"
    for i, names in enumerate(CORE_LAYERS):
        if first in names:
            return i
    raise AssertionError(f"{mod}: a core module in no layer; add it to CORE_LAYERS and "
                         "docs/architecture.md")


def violations(extra: dict[pathlib.Path, str] | None = None) -> list[str]:
    """Every broken rule; ``extra`` adds virtual modules (path -> source) to the check."""
    found = []
    files = [(p, None) for p in sources()] + list((extra or {}).items())
    for path, text in files:
        me = module_name(path)
        part = me.split(".")[1] if "." in me else ""
        my_layer = core_layer(me)
        for line, target, _top in imports_of(path, text):
            where = f"{path.relative_to(PKG.parent)}:{line}"
            for bad in FORBIDDEN.get(part, ()):
                if target == bad or target.startswith(bad + "."):
                    found.append(f"{where}: {me} imports {target}, which the {part} layer never "
                                 "imports (docs/architecture.md, Layers)")
            their = core_layer(target) if target.startswith(ROOT + ".core") else None
            if my_layer is not None and their is not None and their > my_layer:
                found.append(f"{where}: {me} (core layer {my_layer}: "
                             f"{'/'.join(sorted(CORE_LAYERS[my_layer]))}) imports {target} "
                             f"(layer {their}: {'/'.join(sorted(CORE_LAYERS[their]))}); core "
                             "imports point down only")
    return found


def cycles(include_function_level: bool) -> list[list[str]]:
    """Strongly connected components (>1 module) of the package's import graph."""
    mods = {module_name(p): p for p in sources()}
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        for _line, target, top in imports_of(p):
            if (top or include_function_level) and target in mods and target != m:
                graph[m].add(target)
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_layers_import_downward_only():
    found = violations()
    assert not found, "import-layer violations:\n" + "\n".join(found)


@pytest.mark.parametrize("include_function_level", [False, True], ids=["module-level", "all-imports"])
def test_no_import_cycle(include_function_level):
    found = cycles(include_function_level)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("where, source, expect", [
    ("core/format/_probe.py", "from airflow_hudi_occ.spark import writer\n", "airflow_hudi_occ.spark"),
    ("core/table/_probe.py", "def f():\n    from airflow_hudi_occ.core.commit import transaction\n",
     "core imports point down only"),
    ("core/commit/_probe.py", "from ..services import clean\n", "core imports point down only"),
    ("spark/_probe.py", "import airflow\n", "the spark layer never imports"),
])
def test_the_check_sees_a_wrong_import(where, source, expect):
    """The rules are live: each kind of wrong import is reported with its file and line."""
    found = violations({PKG / where: source})
    assert any("_probe.py:" in f and expect in f for f in found), found
