"""Shared test setup: GPU tests are marked ``gpu`` and skipped where CUDA is absent."""

import pytest


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
