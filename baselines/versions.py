"""Which cuBLAS the baselines run on: versions and the library files actually loaded.

Results are only comparable with the library they were measured on, so every run records this.
Nothing here raises: on a machine without CUDA (or without a driver, where nvmath cannot load
libcublas) the version fields are "" and the error is recorded in ``error``.

nvmath-python loads libcublas through cuda-pathfinder, which returns a copy already loaded in the
process when there is one. ``torch`` is imported first so that, on a CUDA build, torch's copy (the
nvidia-cublas wheel) is the one found. ``cublas_files_loaded`` lists every libcublas* mapped into
the process: one libcublas and one libcublasLt means torch and the baselines share them.
"""

from __future__ import annotations


def _dotted(v: int) -> str:
    """cuBLAS encodes versions as major*10000 + minor*100 + patch (e.g. 130100 -> 13.1.0)."""
    return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"


def loaded_cublas_files() -> list[str]:
    """Paths of libcublas*/libcublasLt* shared objects mapped into this process (Linux)."""
    files = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.rstrip("\n").split(maxsplit=5)
                if len(fields) == 6 and "libcublas" in fields[5].rsplit("/", 1)[-1]:
                    files.add(fields[5])
    except OSError:
        pass
    return sorted(files)


def library_versions() -> dict:
    out = {
        "nvmath_version": "",
        "cublas_version": "",
        "cublaslt_version": "",
        "cublas_library": "",
        "cublas_found_via": "",
        "cublaslt_library": "",
        "cublas_files_loaded": [],
        "cublas_single_copy": False,
        "torch_cuda": "",
        "error": "",
    }
    errors = []
    try:
        import torch

        out["torch_cuda"] = torch.version.cuda or ""
    except Exception as e:  # pragma: no cover - torch is a hard dependency
        errors.append(f"torch: {e}")
    try:
        import nvmath

        out["nvmath_version"] = getattr(nvmath, "__version__", "")
    except Exception as e:
        errors.append(f"nvmath: {e}")
    try:
        from nvmath.bindings import cublas

        parts = [cublas.get_property(p) for p in (0, 1, 2)]  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        out["cublas_version"] = ".".join(str(p) for p in parts)
    except Exception as e:
        errors.append(f"cublas: {e}")
    try:
        from nvmath.bindings import cublasLt

        out["cublaslt_version"] = _dotted(int(cublasLt.get_version()))
    except Exception as e:
        errors.append(f"cublasLt: {e}")
    for lib, key in (("cublas", "cublas_library"), ("cublasLt", "cublaslt_library")):
        try:
            from cuda import pathfinder

            loaded = pathfinder.load_nvidia_dynamic_lib(lib)  # cached: the handle nvmath uses
            out[key] = loaded.abs_path or ""
            if lib == "cublas":
                out["cublas_found_via"] = loaded.found_via
        except Exception as e:
            errors.append(f"pathfinder {lib}: {str(e).strip()}")
    out["cublas_files_loaded"] = loaded_cublas_files()
    # True when exactly one libcublas (not Lt) is mapped and it is the one nvmath resolved: torch
    # and the baselines then run the same cuBLAS. False on CPU machines (nothing loaded).
    main = [f for f in out["cublas_files_loaded"] if "libcublasLt" not in f]
    import os

    nvmath_copy = os.path.realpath(out["cublas_library"]) if out["cublas_library"] else ""
    out["cublas_single_copy"] = bool(nvmath_copy) and [os.path.realpath(f) for f in main] == [nvmath_copy]
    out["error"] = "; ".join(errors)
    return out


if __name__ == "__main__":  # python -m baselines.versions
    import json

    print(json.dumps(library_versions(), indent=2))
