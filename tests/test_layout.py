"""The code's shape (``coflow.devtools.layout``, run by ``make lint``): no import circle in the
package, no Python file outside the tests over 800 lines; and the checker itself goes red on a
circle (at module level or through a lazy import) and on a long file."""
import os
import textwrap

from coflow.devtools import layout as L

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _package(tmp_path, files: dict[str, str]) -> str:
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if not (p.parent / "__init__.py").exists() and p.name != "__init__.py":
            (p.parent / "__init__.py").write_text("")
        p.write_text(textwrap.dedent(text))
    return str(root)


def test_the_package_has_no_import_circle_and_no_long_module():
    assert L.circles(L.graph(os.path.join(REPO, "controller", "coflow"))) == []
    assert L.long_files(L.tracked_python(REPO)) == []
    assert L.main([]) == 0


def test_a_circle_goes_red_at_module_level_and_through_a_lazy_import(tmp_path, capsys):
    root = _package(tmp_path, {
        "a.py": "from .b import x\n",
        "b.py": "x = 1\ndef f():\n    from . import a\n    return a\n",       # lazy: still an arrow
        "sub/c.py": "from ..a import x\nfrom . import d\n",
        "sub/d.py": "import pkg.sub.c\n",
        "ok.py": "from .a import x\n",
    })
    g = L.graph(root)
    assert g["pkg.a"] == {"pkg.b"} and g["pkg.b"] == {"pkg.a"} and g["pkg.sub.d"] == {"pkg.sub.c"}
    assert L.circles(g) == [["pkg.a", "pkg.b"], ["pkg.sub.c", "pkg.sub.d"]]
    assert L.main(["--package", root, "--files"]) == 1
    out = capsys.readouterr().out
    assert "import circle: pkg.a -> pkg.b -> pkg.a" in out and "pkg.sub.c -> pkg.sub.d -> pkg.sub.c" in out


def test_a_package_assembling_itself_is_no_circle_but_its_modules_arrows_count(tmp_path):
    """``__init__`` importing its submodules is left out; a submodule's import of the package's
    ``__init__`` is an arrow, and closes a circle through another package's module."""
    root = _package(tmp_path, {"__init__.py": "from .a import x\nfrom . import b\n", "a.py": "from . import y\nx = 1\n",
                               "b.py": "from .a import x\n"})
    g = L.graph(root)
    assert g["pkg"] == set() and g["pkg.a"] == {"pkg"} and g["pkg.b"] == {"pkg.a"}
    assert L.circles(g) == []
    root2 = _package(tmp_path / "two", {"q/__init__.py": "from ..c import z\n", "c.py": "import pkg.q\nz = 1\n"})
    assert L.circles(L.graph(root2)) == [["pkg.c", "pkg.q"]]


def test_a_long_file_goes_red(tmp_path, capsys):
    short, long_ = tmp_path / "short.py", tmp_path / "long.py"
    short.write_text("x = 1\n" * 800)
    long_.write_text("x = 1\n" * 801)
    assert L.long_files([str(short), str(long_)]) == [(str(long_), 801)]
    root = _package(tmp_path, {"a.py": ""})
    assert L.main(["--package", root, "--files", str(short)]) == 0
    assert L.main(["--package", root, "--files", str(long_)]) == 1
    assert "long.py: 801 lines" in capsys.readouterr().out
