"""The installed package: one import name, its data inside it, read as package resources.

CI runs this suite twice: against the editable install in the checkout, and against the
built wheel installed without ``-e`` from a folder outside the checkout, with
``AMPREF_TEST_INSTALLED=1`` (then the package under test must not be the checkout's).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
from importlib import resources
from pathlib import Path

import pytest

import ampref
from ampref import backends
from ampref.policy.policies import load_policy, policy_names
from ampref.backends import kernelsrc
from paths import ROOT



@pytest.mark.clause("API-PKG-001")
def test_the_distribution_installs_one_top_level_package_named_ampref() -> None:
    """Inputs: the installed distribution's top_level.txt. Expected: exactly 'ampref'.
    Pass: equal."""
    top = importlib.metadata.distribution("ampref").read_text("top_level.txt")
    assert top is not None and top.split() == ["ampref"]


@pytest.mark.clause("API-PKG-001")
def test_every_subpackage_of_the_checkout_is_listed_for_the_wheel() -> None:
    """Inputs: pyproject.toml's package list and every __init__.py under ampref/. Expected:
    every subpackage listed. Pass: none missing."""
    # a folder missing from pyproject's list imports in the checkout and is absent from
    # the wheel; CI's installed-wheel run would only see it as an ImportError
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the tomli backport, a dependency there (pyproject.toml)
        import tomli as tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(("ampref", *p.parent.relative_to(ROOT / "ampref").parts)).rstrip(".")
             for p in (ROOT / "ampref").rglob("__init__.py") if "__pycache__" not in p.parts}
    assert found <= listed, f"not in pyproject.toml's packages: {sorted(found - listed)}"


def test_backends_are_a_subpackage_of_ampref() -> None:
    assert backends.__name__ == "ampref.backends"
    assert backends.get("numpy").xp.__name__ == "numpy"


@pytest.mark.clause("API-PKG-001")
def test_shipped_policies_are_package_data_from_the_single_source_in_specs() -> None:
    """Inputs: the shipped policy resources. Expected: byte-identical to
    specs/policies/*.toml and loadable by name. Pass: both."""
    assert {"torch-cpu", "torch-cuda"} <= set(policy_names())
    for name in ("torch-cuda", "torch-cpu"):
        shipped = resources.files("ampref.policy.shipped").joinpath(f"{name}.toml").read_bytes()
        assert shipped == (ROOT / "specs" / "policies" / f"{name}.toml").read_bytes()
        assert load_policy(name).name == name


def test_cuda_sources_and_the_embedded_text_are_package_data() -> None:
    assert "ampref_quantize_f32" in kernelsrc.device_source()
    assert "mma" in kernelsrc.mma_source()
    for name in ("ampref_kernels.cuh", "kernels.cu", "mma_chain.cu", "host_harness.cpp"):
        assert kernelsrc.cuda_source(name) == (ROOT / "backends" / "cuda" / name).read_text()
    text = resources.files("ampref.training").joinpath("declaration.txt").read_text(
        encoding="utf-8")
    assert text.startswith("In Congress, July 4, 1776.")


def test_an_unknown_cuda_source_is_refused_with_the_shipped_names() -> None:
    with pytest.raises(ValueError, match=r"unknown CUDA source 'nope.cu'; shipped: .*kernels.cu"):
        kernelsrc.cuda_source("nope.cu")


@pytest.mark.skipif(not os.environ.get("AMPREF_TEST_INSTALLED"),
                    reason="only in CI's run against the installed wheel")
@pytest.mark.clause("API-PKG-001")
def test_the_package_under_test_is_the_installed_wheel_not_the_checkout() -> None:
    """Inputs (CI's wheel run only): the imported ampref's location. Expected: outside the
    checkout, with the CUDA header, the shipped policy and every source file of the
    checkout. Pass: all."""
    pkg = Path(ampref.__file__).resolve().parent
    assert ROOT not in pkg.parents, pkg
    assert (pkg / "backends" / "cuda" / "ampref_kernels.cuh").is_file()
    assert (pkg / "policy" / "shipped" / "torch-cuda.toml").is_file()
    # every source file of the checkout is in the wheel (a subpackage missing from
    # pyproject's list would be dropped silently)
    for src_dir, dest in ((ROOT / "ampref", pkg), (ROOT / "backends", pkg / "backends")):
        for f in src_dir.rglob("*.py"):
            assert (dest / f.relative_to(src_dir)).is_file(), f"{f} is missing from the wheel"


def _floors() -> dict[str, str]:
    """Every ``name>=version`` floor of pyproject's dependencies and extras (ampref's own
    optional peers that CI cannot install at their floor are listed in UNTESTED_FLOORS)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.findall(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?>=([0-9][0-9.]*)', text)
    return {name.lower().replace("_", "-"): version for name, version in found}


#: floors of optional peers the oldest-versions stage does not install: the GPU stack
#: (no GPU in CI) and the conformance peers (torch is tested at the version CI installs,
#: 2.13, and was run at 2.11 on the H100 host; jax/jmp only feed recorded vectors)
UNTESTED_FLOORS = {"cupy-cuda12x", "cupy-cuda13x", "torch", "jax", "jmp", "torchao",
                   "setuptools"}


@pytest.mark.clause("API-PKG-001")
def test_the_oldest_versions_stage_pins_every_floor_pyproject_allows() -> None:
    """Input: pyproject.toml's ``>=`` floors and .ci/oldest.txt's ``==`` pins. Expected:
    each floor outside UNTESTED_FLOORS is pinned at exactly that version. Pass: no floor
    missing or differing (raising a floor without the CI stage, or the reverse, fails)."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([0-9.]+)$",
                           (ROOT / ".ci" / "oldest.txt").read_text(encoding="utf-8"), re.M))
    pins = {k.lower().replace("_", "-"): v for k, v in pins.items()}
    floors = {k: v for k, v in _floors().items() if k not in UNTESTED_FLOORS}
    assert floors, "no floors parsed from pyproject.toml"
    def same(a: str, b: str | None) -> bool:  # 1.26 == 1.26.0
        def key(v: str) -> list[int]:
            parts = [int(p) for p in v.split(".")]
            while parts and parts[-1] == 0:
                parts.pop()
            return parts
        return b is not None and key(a) == key(b)

    wrong = {k: (v, pins.get(k)) for k, v in floors.items() if not same(v, pins.get(k))}
    assert not wrong, f"floor (pyproject) vs pin (.ci/oldest.txt): {wrong}"


#: top-level modules the suite imports or skips on; a folder of tests/ with one of these
#: names becomes a namespace package on sys.path (conftest puts tests/ there) and shadows
#: the real module where it is absent: `import torch` found tests/torch on a machine
#: without torch, and importorskip then ran the torch tests against a folder
OPTIONAL = {"torch", "torchao", "jax", "jmp", "cupy", "dask", "distributed", "matplotlib",
            "jinja2", "markdown_it", "pypdf", "numba", "scipy", "ml_dtypes", "numpy",
            "hypothesis", "pytest", "tqdm", "ampref"}


def test_no_test_folder_shadows_a_module_the_suite_imports() -> None:
    """Input: the folder names under tests/. Expected: none is the name of a module the
    suite imports (OPTIONAL). Pass: the intersection is empty."""
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir()}
    assert not folders & OPTIONAL, f"rename these test folders: {sorted(folders & OPTIONAL)}"
