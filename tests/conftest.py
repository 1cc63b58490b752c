"""Shared test setup: GPU tests are marked ``gpu`` and skipped where CUDA is absent."""

from pathlib import Path

import pytest

STUDIES = Path(__file__).resolve().parents[1] / "lab/studies"


def study_specs(name: str) -> list[str]:
    """The specs in a study's file under lab/studies/ (one a line, ``#`` comments),
    in order: the tests of a study's configs check exactly the configs the study measured."""
    return [ln.strip() for ln in (STUDIES / name).read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def build_config(fam, k):
    """Family ``fam``'s config ``k`` built for sm_90a (or taken from the build cache): the CPU build tests'
    one way to compile a config."""
    from kernels_search import build

    return build.build(fam.render(k), fam.extra_flags(k), extra_key=fam.extra_key(k))


def sass_of(lib_path) -> str:
    """The SASS of a built library; skips the test where cuobjdump is missing."""
    from kernels_search import toolchain

    if not toolchain.find_cuobjdump():
        pytest.skip("cuobjdump not installed (set HGEMM_CUOBJDUMP)")
    return toolchain.dump_sass(lib_path)


def _has_nvcc() -> bool:
    from kernels_search import toolchain

    return toolchain.find_nvcc() is not None


needs_nvcc = pytest.mark.skipif(not _has_nvcc(), reason="nvcc not installed")


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


HAS_CUDA = _cuda_available()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh build cache per test module: builds compile instead of trusting an old artifact,
    and each config compiles once however many tests of the module use it."""
    d = tmp_path_factory.mktemp("hgemm-build-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("HGEMM_BUILD_CACHE", str(d))
    yield d
    mp.undo()


@pytest.fixture(autouse=True, scope="session")
def _no_user_library(tmp_path_factory):
    """No test reads or writes the library of the user running the tests (``$XDG_DATA_HOME``)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    yield
    mp.undo()
