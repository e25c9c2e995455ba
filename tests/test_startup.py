"""Start-up cost: `import superbloom` and the command line's help import no torch (issue 28).

Each check runs in a fresh interpreter, so that what the test process already imported does not hide
an import."""
import inspect
import subprocess
import sys

import superbloom as sb

HEAVY = ("torch", "scipy", "pyarrow", "superbloom.train")


def _imported_after(code: str) -> set[str]:
    """The heavy modules in sys.modules after running `code` in a fresh interpreter."""
    probe = f"{code}\nimport sys; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(out.stdout.split())


def test_import_superbloom_imports_no_torch():
    assert _imported_after("import superbloom; superbloom.__version__; superbloom.embedded_dataset()") == set()


def test_every_public_name_resolves():
    for name in sb.__all__:
        assert getattr(sb, name) is not None, name
    assert set(sb.__all__) <= set(dir(sb))
    assert inspect.isfunction(sb.train) and sb.train.__module__ == "superbloom.train"


def test_submodule_import_keeps_the_public_function():
    """`import superbloom.evaluate` binds the submodule on the package; sb.evaluate stays the function."""
    code = ("import inspect, superbloom as sb, superbloom.evaluate, superbloom.compare, superbloom.expand, "
            "superbloom.prepare, superbloom.train\n"
            "assert all(inspect.isfunction(getattr(sb, n)) for n in ('evaluate', 'compare', 'expand', 'prepare', "
            "'train'))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_unknown_name_is_an_attribute_error():
    try:
        sb.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("no AttributeError")
