"""The package's layers: imports run one way (down), a model never imports another model, and
no import cycle exists, lazy imports included (a cycle hidden in a function body is still a
cycle)."""

import ast
import pathlib

import bnpjax

PACKAGE_DIR = pathlib.Path(bnpjax.__file__).parent

#: Layer of each top-level part of the package; a module may import its own layer's part or
#: any lower layer. Facades (rank 4) may use each other.
RANK = {
    "ops": 0,
    "compilation_cache": 0,
    "infer": 1,
    "priors": 2,
    "testing": 2,
    "models": 3,
    "datasets": 4,
    "plots": 4,
    "metrics": 4,
    "fm": 4,
    "cli": 5,
    "__main__": 5,
    "__init__": 5,
}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}


def _imports(path: pathlib.Path, module: str):
    """Every bnpjax module imported anywhere in the file (module level and function bodies)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            # "from bnpjax.x import y" names the submodule bnpjax.x.y where there is one
            # (importing it runs bnpjax.x's __init__ either way, which is no edge of its own)
            names = [f"{prefix}.{alias.name}" for alias in node.names]
            names = [n if n in MODULES else prefix for n in names]
        else:
            continue
        for name in names:
            if name and name.startswith("bnpjax"):
                yield name


def _graph():
    edges = {}
    for name, path in MODULES.items():
        edges[name] = {target for target in _imports(path, name) if target in MODULES} - {name}
    return MODULES, edges


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_imports_run_down_the_layers():
    _, edges = _graph()
    bad = []
    for source, targets in edges.items():
        for target in targets:
            src, dst = _part(source), _part(target)
            if src not in RANK or dst not in RANK:
                bad.append(f"{source} -> {target}: unknown part (add it to RANK)")
            elif RANK[dst] > RANK[src] or (RANK[dst] == RANK[src] < 4 and src != dst):
                bad.append(f"{source} -> {target}")
    assert not bad, "imports that run up or across a layer:\n" + "\n".join(sorted(bad))


def test_no_model_imports_another_model():
    _, edges = _graph()
    bad = []
    for source, targets in edges.items():
        if source.startswith("bnpjax.models."):
            model = source.split(".")[2]
            for target in targets:
                if target.startswith("bnpjax.models.") and target.split(".")[2] != model:
                    bad.append(f"{source} -> {target}")
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    _, edges = _graph()
    # a package importing its own submodules (re-exports) is not a cycle unless a submodule
    # imports the package back
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*stack[stack.index(target) :], target]))
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_tests_mirror_the_package():
    """Every test folder is named after a subpackage of bnpjax (the Geweke rows and the
    recorded draws, the two tables, excepted), so a module's tests are found by its path."""
    tests = pathlib.Path(__file__).parent
    package = tests.parent / "bnpjax"
    tables = {"geweke_cases", "reference"}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith("__")}
    strays = sorted(folders - tables - {p.name for p in package.iterdir() if p.is_dir()})
    assert not strays, f"test folders with no bnpjax subpackage of that name: {strays}"
