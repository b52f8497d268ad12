"""Sphinx configuration of the bnpjax documentation.

Build (warnings are errors, as in CI)::

    sphinx-build -W --keep-going -b html docs docs/_build/html

The API reference is generated here, at configuration time, from the packages themselves: one
page per package listed in ``API_PACKAGES`` (its ``__all__``), and for every model package
under ``bnpjax.models`` one page with its face plus a section per public submodule (the
algorithm modules' ``init`` / ``build_step`` and whatever the package does not re-export).
A model package added later appears without editing this file.
"""

import importlib
import inspect
import os
import pkgutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's bnpjax first, not an installed copy
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import bnpjax  # noqa: E402

project = "bnpjax"
author = "bnpjax developers"
copyright = "2026, bnpjax developers"
release = bnpjax.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}

# the notebooks (notebooks/*.ipynb) are rendered with the outputs they are committed with, never
# executed here: myst-nb (the docs extra) replaces myst-parser when it is installed; without it
# the notebooks page only lists them (see _notebook_pages below)
try:
    import myst_nb  # noqa: F401

    extensions[extensions.index("myst_parser")] = "myst_nb"
    source_suffix.update({".md": "myst-nb", ".ipynb": "myst-nb"})
    nb_execution_mode = "off"
    nb_merge_streams = True
    RENDER_NOTEBOOKS = True
except ImportError:
    RENDER_NOTEBOOKS = False
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "requirements.txt"]

# MyST: $...$ and $$...$$ math, ::: fences, headings as link targets
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# autodoc / numpydoc
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"  # the numpydoc Parameters sections carry the types
autodoc_inherit_docstrings = False
numpydoc_show_class_members = False  # NamedTuple fields and methods otherwise fill the page
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()  # docstring style is reviewed, not enforced by the build
numpydoc_xref_param_type = False
nitpicky = False

# no intersphinx: CI builds offline with -W, where unreachable inventories are warnings

html_theme = "pydata_sphinx_theme"
html_title = f"bnpjax {release}"
html_static_path = ["_static"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "github_url": None,
    # notebook pages hold wide code, tables and figures: no right-hand sidebar there, so
    # the content column is not squeezed to ~470 px with horizontal scrollbars
    "secondary_sidebar_items": {
        pattern: ["page-toc"] for pattern in ("*", "models/*", "guides/*", "api/*")
    }
    | {"notebooks/*": []},
}
html_show_sourcelink = False


# --- the API reference ----------------------------------------------------------------------

# (package, recurse into its public submodules); model packages are found, not listed
API_PACKAGES = [
    ("bnpjax", False),
    ("bnpjax.infer", True),
    ("bnpjax.priors", True),
    ("bnpjax.ops", True),
    ("bnpjax.datasets", True),
    ("bnpjax.testing", True),
    ("bnpjax.metrics", False),
    ("bnpjax.compilation_cache", False),
    ("bnpjax.fm", False),  # the myFM-style estimators, while they live there
]


def _public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        ]
    return [n for n in names if n != "__version__"]


def _title(text, char="="):
    return f"{text}\n{char * len(text)}\n"


def _automodule(name, members=(), *, no_index=False):
    """The module's docstring, then one autodoc directive per member, in the given order.

    Members are listed one by one rather than through ``:members:``, so that exactly the
    chosen names are documented (a package's face; a submodule's names the face lacks).
    """
    module = importlib.import_module(name)
    lines = [f".. automodule:: {name}", "   :no-members:"]
    if no_index:
        lines.append("   :no-index:")
    lines += ["", f".. currentmodule:: {name}", ""]
    for member in members:
        obj = getattr(module, member)
        if inspect.isclass(obj):
            directive = "autoclass"
        elif callable(obj):
            directive = "autofunction"
        else:
            # a constant: its ``#:`` comment, written out here, since autodoc reads comments
            # only in the module that assigns it and otherwise prints the type's docstring
            # (numpy's, for an array)
            lines += [f".. py:data:: {member}"]
            lines += ["   :no-index:"] if no_index else []
            lines += [""] + [f"   {line}" for line in _attribute_doc(name, member)] + [""]
            continue
        lines.append(f".. {directive}:: {member}")
        if no_index:
            lines.append("   :no-index:")
        lines.append("")
    return "\n".join(lines) + "\n"


def _attribute_doc(module_name, member):
    """The lines of ``member``'s ``#:`` comment in ``module_name`` or in the module it is
    imported from (a sibling submodule of a package); empty if it has none."""
    from sphinx.pycode import ModuleAnalyzer

    module = importlib.import_module(module_name)
    candidates = [module_name] + [f"{module_name}.{sub}" for sub in _submodules(module)]
    for candidate in candidates:
        try:
            docs = ModuleAnalyzer.for_module(candidate).find_attr_docs()
        except Exception:  # no source (an extension module)
            continue
        if ("", member) in docs:
            return [line for line in docs["", member] if line.strip()]
    return []


def _submodules(package):
    if not hasattr(package, "__path__"):
        return []
    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")
    )


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _members(module, recurse):
    """``{qualified name: object}`` of a package's face and of its public submodules."""
    face = {
        n: getattr(module, n)
        for n in _public_names(module)
        if hasattr(module, n) and not inspect.ismodule(getattr(module, n))
    }
    out = {module.__name__: face}  # submodules in __all__ get their own section below
    for sub in _submodules(module) if recurse else []:
        mod = importlib.import_module(f"{module.__name__}.{sub}")
        out[mod.__name__] = {
            n: getattr(mod, n)
            for n in _public_names(mod)
            if hasattr(mod, n) and not inspect.ismodule(getattr(mod, n))
        }
    return out


def _pages():
    """``[(page, recurse)]``: the listed packages, then every model package found."""
    pages = []
    for name, recurse in API_PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        pages.append((name, recurse))
    models = importlib.import_module("bnpjax.models")
    pages += [(f"bnpjax.models.{sub}", True) for sub in _submodules(models)]
    return pages


def generate_api(out=HERE / "api" / "generated"):
    pages = _pages()
    modules = {name: _members(importlib.import_module(name), recurse) for name, recurse in pages}
    # every object is documented once, at its home: the first module (packages in the order
    # above, the top-level bnpjax last, a package before its submodules) that exports it;
    # elsewhere it is a link
    home = {}
    order = [p for p in pages if p[0] != "bnpjax"] + [p for p in pages if p[0] == "bnpjax"]
    for name, _ in order:
        for module_name, members in modules[name].items():
            for member, obj in members.items():
                home.setdefault(id(obj), f"{module_name}.{member}")
    written = []
    for name, _ in pages:
        text = [_title(f"``{name}``")]
        for i, (module_name, members) in enumerate(modules[name].items()):
            own = [m for m in members if home[id(members[m])] == f"{module_name}.{m}"]
            links = [(m, home[id(members[m])]) for m in members if m not in own]
            if i:
                if not own and module_name.rsplit(".", 1)[1] in modules[name][name]:
                    continue  # a submodule shadowed by a function of the same name, all re-exported
                text.append(_title(f"``{module_name}``", "-"))
            # a submodule named like one of the package's functions (datasets.movielens)
            shadowed = i and module_name.rsplit(".", 1)[1] in modules[name][name]
            text.append(_automodule(module_name, own, no_index=shadowed))
            if links and i == 0:
                text.append(".. rubric:: Also exported here\n")
                text += [f"* ``{module_name}.{m}``: :py:obj:`{target}`" for m, target in links]
                text.append("")
        _write(out / f"{name}.rst", "\n".join(text) + "\n")
        written.append(name)
    for stale in out.glob("*.rst"):
        if stale.stem not in written:
            stale.unlink()
    return written


API_PAGES = generate_api()


# --- the notebooks --------------------------------------------------------------------------


def _notebook_title(path):
    """The first heading of a notebook's first Markdown cell (its file name if none)."""
    import json

    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return path.stem


def _notebook_pages(source=HERE.parent / "notebooks", out=HERE / "notebooks"):
    """``docs/notebooks/``: a copy of every notebook and an index page of them (generated, not
    committed); without myst-nb the index lists them without rendering them."""
    import shutil

    notebooks = sorted(source.glob("*.ipynb"))
    out.mkdir(exist_ok=True)
    for stale in out.glob("*.ipynb"):
        if not RENDER_NOTEBOOKS or not (source / stale.name).exists():
            stale.unlink()
    lines = [
        "# Notebooks\n",
        "Worked examples, each run top to bottom on a CPU and shown with its outputs as committed "
        "(the test suite re-executes every one with shorter settings). They live in the "
        "repository's `notebooks/` folder; download one and run it in Jupyter.\n",
    ]
    if RENDER_NOTEBOOKS:
        for path in notebooks:
            target = out / path.name
            if not target.exists() or target.read_bytes() != path.read_bytes():
                shutil.copyfile(path, target)
        lines += ["```{toctree}", ":maxdepth: 1", ""] + [p.stem for p in notebooks] + ["```"]
    else:
        lines += [f"- `notebooks/{p.name}`: {_notebook_title(p)}" for p in notebooks]
        lines += ["", "(This build lacks myst-nb, which renders them: install the docs extra.)"]
    _write(out / "index.md", "\n".join(lines) + "\n")


_notebook_pages()
