"""The ``hgemm-bench`` command line: thin wiring from flags to the runner and the store.

Everything that measures lives in ``harness.evaluate`` and ``harness.timing``; this module only
parses input, turns bad input into one clear error line (exit code 2), shows progress, and
prints the summary. Commands of other packages (``report``, ``search``) plug in the way methods
do in ``harness.registry``: see ``mount_commands``.

Start-up imports nothing heavy (no torch): ``--help`` answers at once. Each command imports
what it needs when it runs.
"""

from __future__ import annotations

import importlib
import json
import sys
import uuid
from datetime import timedelta
from enum import Enum
from importlib import metadata
from pathlib import Path
from typing import List, Optional, Sequence

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from harness import compare_defaults
from harness.console import console, echo, err_console
from harness.console import fail as _fail
from harness.model_shapes import BUNDLED as BUNDLED_MODELS
from harness.model_shapes import DEFAULT_BATCHES as DEFAULT_MODEL_BATCHES
from harness.progress import Eta, Reporter, format_duration

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Honest fp16 GEMM benchmarks: which kernel is fastest for this shape on this GPU?")


class Mode(str, Enum):
    offline = "offline"
    server = "server"
    both = "both"


class Cache(str, Enum):
    warm = "warm"
    cold = "cold"
    both = "both"


class Isolate(str, Enum):
    auto = "auto"
    on = "on"
    off = "off"


class Device(str, Enum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


def _warn_methods_missing_from_done_groups(store, methods: list[str], only: dict | None = None) -> None:
    """A finished group is never measured again (its rows pair up within one timing run), so a
    method added on resume is not measured on the shapes already done: say so, not silently
    (``only``: a ``--plan``'s methods per shape, the ones expected there)."""
    from harness.evaluate import HARNESS_ERROR
    from harness.results import GROUP_COLUMNS, group_key

    done = store.done_groups(retry_reason_prefix=HARNESS_ERROR)
    have: dict[tuple, set] = {}
    for r in store.rows:
        have.setdefault(group_key(r), set()).add(r["method"])
    shape_at = GROUP_COLUMNS.index("shape")

    def expected(g) -> set:
        return set((only or {}).get(g[shape_at], methods))

    lacking = [g for g in done if expected(g) - have.get(g, set())]
    if lacking:
        missing = sorted(set().union(*(expected(g) - have[g] for g in lacking)))
        shapes = sorted({g[shape_at] for g in lacking})
        err_console.print(f"[yellow]warning:[/] {len(missing)} requested method(s) are not in {len(lacking)} finished "
                          f"group(s) of {escape(str(store.path))} and will not be measured there "
                          f"({', '.join(missing[:3])}"
                          f"{', ...' if len(missing) > 3 else ''}; shapes {', '.join(shapes[:5])}"
                          f"{', ...' if len(shapes) > 5 else ''}): use --fresh or another --out to measure them")


def _split(values: List[str]) -> List[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _split_methods(values: List[str]) -> List[str]:
    """Method specs, comma separated; a ``k=v`` piece without a name belongs to the spec before
    it, so ``splitk:bm=64,splits=16,torch`` is two specs."""
    out: List[str] = []
    for piece in _split(values):
        if "=" in piece and ":" not in piece and out and ":" in out[-1]:
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out


class _EtaColumn(ProgressColumn):
    """Time left, from the work left (``harness.progress.Eta``), not from a per-shape average."""

    def __init__(self, eta: Eta):
        super().__init__()
        self.eta = eta

    def render(self, task) -> Text:
        left = self.eta.remaining_s()
        if task.finished or left is None:
            return Text("" if task.finished else "-:--:-- left", style="progress.remaining")
        return Text(f"~{timedelta(seconds=round(left))} left", style="progress.remaining")


def _progress_bar(eta: Eta, out=None) -> Progress:
    """The bar over shapes; its stage text names methods (a --kernels-dir file name among them), so it is
    printed as it is, never read as markup."""
    return Progress(TextColumn("[bold]{task.description:>16}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), _EtaColumn(eta), TextColumn("{task.fields[stage]}", markup=False),
                    console=out or console, transient=False)


class _RichReporter(Reporter):
    """Progress bars for the runner: one bar over shapes, a line for the current stage."""

    def __init__(self, progress: Progress, total: int, eta: Eta):
        self.p = progress
        self.eta = eta
        self.task = progress.add_task("shapes", total=total, stage="")
        self.running: dict = {}  # index -> shape, for every shape in flight (several on a scale-out run)

    def shape_started(self, index, total, shape):
        self.eta.started(shape)
        self.running[index] = shape
        self.p.update(self.task, description=f"{shape.name}")

    def stage(self, text):
        self.p.update(self.task, stage=text)

    def shape_done(self, index, rows):
        shape = self.running.pop(index)
        self.eta.done(shape)
        bad = sum(r["status"] != "ok" and r["status"] != "unsupported" for r in rows)
        if bad:
            self.p.console.print(f"[yellow]{shape.name}: {bad} row(s) failed (see summary)[/]")
        self.p.advance(self.task)

    def skipped(self, shape):
        self.eta.skipped(shape)
        self.p.advance(self.task)


CPU_WARN_S = 600.0  # on a CPU, a run predicted to take longer than this is announced with its estimate


def _check_fits(shapes, methods, layouts: int, caches: list[str], dev: str, env: dict) -> None:
    """Refuse, before anything is measured, a shape whose buffers cannot fit in the device's
    memory (free GPU memory, or the RAM the CPU has available)."""
    from harness import env as envmod
    from harness.problem import Problem
    from harness.evaluate import run_bytes

    avail = envmod.available_bytes(dev)
    if avail is None:
        return
    candidates = sum(dev in m.devices for m in methods) or 1
    where = "free GPU memory" if dev == "cuda" else "available RAM"
    for shape in shapes:
        need = run_bytes(Problem(shape), layouts, candidates, dev, "cold" in caches, int(env.get("l2_bytes", 50 << 20)))
        if need > avail:
            _fail(f"shape {shape.name} needs {_gb(need)} (A, B, C of {layouts} layout(s), the gate's copies and "
                  f"reference) but the {'GPU' if dev == 'cuda' else 'CPU'} has {_gb(avail)} of {where}; "
                  "nothing was measured")


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


MIN_BATCH_US = 50.0  # --batch-us floor: a batch this short still spans 100 event resolutions


@app.command()
def compare(
    shapes: List[str] = typer.Option([], "--shapes", "-s",
                                     help="M_N_K list, a file, a named set (cuda-l2, smoke, smoke-cpu, square), or "
                                          "model:CONFIG@batch=1,16,128@tp=2 (both @ parts optional; batch default "
                                          f"{','.join(map(str, DEFAULT_MODEL_BATCHES))}): the QKV, o, "
                                          "gate/up, down and "
                                          "LM-head GEMMs of a transformers config (a bundled name: "
                                          f"{', '.join(BUNDLED_MODELS)}; a directory; a config.json) with M = tokens, "
                                          "N = output and K = input features; a model runs them in the tn layout "
                                          "(nn.Linear weights are N x K). Default: smoke on a GPU, "
                                          "smoke-cpu on a CPU."),
    methods: List[str] = typer.Option([], "--methods", "-m",
                                      help="Methods (comma separated); default: every baseline. "
                                           "See `hgemm-bench methods`."),
    layouts: str = typer.Option("nn,tn", help="B layouts: nn (B is KxN row-major), tn (B stored NxK)."),
    mode: Mode = typer.Option(Mode.offline, help="offline (back to back), server (Poisson arrivals at --qps), "
                                                 "or both."),
    cache: Cache = typer.Option(Cache.warm, help="warm (same buffers), cold (working set >= 2x L2 or L2 flushed), "
                                                 "or both."),
    device: Device = typer.Option(Device.auto, help="auto: the GPU if there is one, else the CPU path."),
    out: Path = typer.Option(Path("results/compare.parquet"), "--out", "-o",
                             help="Results Parquet. An existing file is resumed: finished groups are skipped."),
    baseline: str = typer.Option("cublaslt-autotune", help="Method the summary's speedups are relative to "
                                                           "(best of layouts)."),
    ci_target: float = typer.Option(compare_defaults.CI_TARGET, help="Offline: stop when every median's relative 95% "
                                                                     "CI half-width is under this."),
    budget: float = typer.Option(compare_defaults.BUDGET_S, help="Offline: time budget per shape and group, seconds."),
    min_rounds: int = typer.Option(compare_defaults.MIN_ROUNDS, help="Offline: rounds before the CI rule may stop."),
    max_rounds: int = typer.Option(compare_defaults.MAX_ROUNDS, help="Offline: hard cap on rounds."),
    batch_us: Optional[float] = typer.Option(None, "--batch-us", help="Offline: GPU microseconds of one device-time "
                                             "sample (calls per batch follow from one call's time); default: the "
                                             "timing core's, 1 ms."),
    no_prime: bool = typer.Option(False, "--no-prime", help="Offline: graph samples without the eager call that "
                                  "precedes each (rows say graph instead of graph+prime; for A/B only: without it "
                                  "cuBLAS's time on small split-K shapes depends on what ran before each sample)."),
    cold_by_cupti: bool = typer.Option(True, "--cold-by-cupti/--cold-by-events", help="Offline --cache cold on "
                                       "shapes too small to rotate input sets: time each flushed call by its "
                                       "kernels' CUPTI records (rows say cupti+flush), or by CUDA events around it, "
                                       "which add their own ~2 us (events+flush; also where CUPTI cannot trace)."),
    qps: float = typer.Option(compare_defaults.QPS, help="Server: mean arrival rate, calls per second."),
    server_calls: int = typer.Option(compare_defaults.SERVER_CALLS, help="Server: calls per method and layout."),
    seed: Optional[int] = typer.Option(None, help="Seed for the gate's draws and the round order (default: fresh)."),
    fresh: bool = typer.Option(False, "--fresh", help="Start a new run in --out instead of resuming it."),
    isolate: Isolate = typer.Option(Isolate.auto, help="Measure in a sandboxed worker process that may crash or hang "
                                    "without harm (auto: when any method is not a baseline)."),
    plugin: List[str] = typer.Option([], "--plugin", help="Python module to import that registers more methods."),
    no_anticheat: bool = typer.Option(False, "--no-anticheat",
                                      help="Skip the anti-cheat checks on non-baseline methods."),
    kernels_dir: List[Path] = typer.Option([], "--kernels-dir", help="Directory of external .cu kernels: our C ABI "
                                           "(cu:<stem>) or PyTorch extensions f(a, b, b_col_major, c) (ext:<stem>)."),
    label: str = typer.Option("", "--label", help="A name for the run that people read (the report's run list "
                              "and leaderboard show it), stored in every row's run_label; "
                              "a resumed run keeps its own."),
    plan: Optional[Path] = typer.Option(None, "--plan", help="A file of 'M_N_K METHOD[,METHOD...]' lines: each shape "
                                        "measured with its own methods (and --methods on every shape), instead of "
                                        "every method on every shape; replaces --shapes. See harness/plan.py."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="Measure on N GPUs (all: every one), one Ray actor pinned "
                                       "to each; shapes are sharded over them and this process alone writes --out. "
                                       "Without --ray, a local Ray instance on this host. Needs the ray extra."),
    workers: Optional[int] = typer.Option(None, "--workers", help="The CPU path's --gpus (--device cpu): N Ray actors "
                                          "of one CPU each, shapes sharded over them."),
    ray_address: Optional[str] = typer.Option(None, "--ray", help="Address of a Ray cluster to run the actors on "
                                              "(host:6379 or ray://host:10001); default --gpus all, or --workers N "
                                              "with --device cpu."),
):
    """Gate and time methods on shapes; write Parquet; print paired speedups."""
    from harness.paths import OutputPathError, check_output_file
    from harness.results import samples_dir

    lays = _split([layouts])
    bad = [x for x in lays if x not in ("nn", "tn")]
    if bad or not lays:
        _fail(f"unknown layout(s) {bad or lays}: use nn and/or tn")
    bad_numbers = [f"{flag} {value:g} must be {rule}" for flag, value, ok, rule in (
        ("--ci-target", ci_target, ci_target > 0, "> 0"), ("--budget", budget, budget > 0, "> 0"),
        ("--qps", qps, qps > 0, "> 0"), ("--min-rounds", min_rounds, min_rounds >= 1, ">= 1"),
        ("--max-rounds", max_rounds, max_rounds >= min_rounds, f">= --min-rounds ({min_rounds})"),
        ("--server-calls", server_calls, server_calls >= 1, ">= 1")) if not ok]
    if bad_numbers:
        _fail("; ".join(bad_numbers))
    if batch_us is not None and batch_us < MIN_BATCH_US:
        _fail(f"--batch-us must be at least {MIN_BATCH_US:g}: the events' resolution is about 0.5 us")
    if plan is not None and shapes:
        _fail("--plan names the shapes: give --plan or --shapes, not both")
    try:
        check_output_file(out, companions=(samples_dir(out),))
    except OutputPathError as e:
        _fail(f"--out: {e}")

    from harness import env as envmod
    from harness.registry import MethodSpecError, default_specs, method_source, resolve
    from harness.runner import CompareSettings
    from harness.shapes import ShapeError, default_set, resolve_shapes

    scale = _scale_out_request(gpus, workers, ray_address, device)
    try:
        dev = scale[0] if scale else envmod.resolve_device(device.value)
    except envmod.NoGPUError as e:
        _fail(str(e))
    planned, origins = None, {}
    if plan is not None:
        from harness.plan import PlanError, read_plan

        try:
            planned = [(shape, _split_methods([text])) for shape, text in read_plan(plan)]
        except PlanError as e:
            _fail(str(e))
        shape_list = [shape for shape, _ in planned]
    else:
        if not shapes:
            shapes = [default_set(dev)]
            console.print(f"no --shapes given: the {shapes[0]} set, sized for {'a GPU' if dev == 'cuda' else 'a CPU'} "
                          "(--shapes names others)")
        try:
            selection = resolve_shapes(shapes)
        except ShapeError as e:
            _fail(str(e))
        shape_list, origins = selection.shapes, selection.origins
    for mod in plugin:
        try:
            importlib.import_module(mod)
        except ImportError as e:
            _fail(f"--plugin {mod}: {e}")
    specs = _split_methods(methods) or ([] if planned else default_specs())
    if planned:
        specs = list(dict.fromkeys(specs + [spec for _, specs_of in planned for spec in specs_of]))
    if kernels_dir:
        source = method_source("kernels-dir")
        if source is None:
            _fail("--kernels-dir needs the kernels_search package, which is not installed")
        missing = [str(d) for d in kernels_dir if not d.is_dir()]
        if missing:
            _fail(f"--kernels-dir: not a directory: {', '.join(missing)}")
        try:
            loaded = source.load(kernels_dir)  # a sandbox worker registers the same methods again
        except ValueError as e:
            _fail(f"--kernels-dir: {e}")
        specs += loaded
        # every file compiled here at once, on every core, so each prepare only loads (a cluster's
        # actors build on their own hosts)
        if source.prebuild is not None and dev == "cuda" and not (scale and scale[2]):
            source.prebuild(loaded, lambda line: console.print(line, markup=False, highlight=False))
    try:
        method_objs = resolve(specs)
    except MethodSpecError as e:
        _fail(str(e))
    if not method_objs:
        _fail("no methods to run")
    only: dict[str, tuple[str, ...]] = {}
    if planned:  # each shape's methods by name (a spec resolves to its canonical name)
        common = [m.name for m in resolve(_split_methods(methods))]
        only = {shape.name: tuple(dict.fromkeys(common + [m.name for m in resolve(specs_of)]))
                for shape, specs_of in planned}
    settings = CompareSettings(
        shapes=shape_list, layouts=lays,
        modes=["offline", "server"] if mode == Mode.both else [mode.value],
        caches=["warm", "cold"] if cache == Cache.both else [cache.value],
        ci_target=ci_target, min_rounds=min_rounds, max_rounds=max_rounds, budget_s=budget,
        **({"batch_us": batch_us} if batch_us is not None else {}), prime=not no_prime, cold_by_cupti=cold_by_cupti,
        qps=qps, server_calls=server_calls, seed=seed, anticheat=not no_anticheat, only=only, origins=origins,
    )
    isolated = isolate == Isolate.on or (isolate == Isolate.auto and any(not m.is_baseline for m in method_objs))
    pool = _start_pool(scale, plugin, isolated) if scale else None
    try:
        _compare_run(pool, dev, device, settings, method_objs, specs, plugin, isolated, shape_list, lays, out, fresh,
                     label, only, baseline)
    finally:
        if pool is not None:
            pool.close()


def _scale_out_request(gpus: Optional[str], workers: Optional[int], address: Optional[str], device: Device):
    """(device, actors or None for every GPU, address) of a scale-out run, or None for a run in
    this process. --gpus asks for GPU actors, --workers for CPU actors, --ray for a cluster."""
    if gpus is None and workers is None and address is None:
        return None
    if gpus is not None and workers is not None:
        _fail("--gpus asks for GPU actors and --workers for CPU actors: give one of them")
    if workers is not None:
        if workers < 1:
            _fail("--workers must be >= 1")
        if device == Device.cuda:
            _fail("--workers runs CPU actors (the CPU path); on GPUs use --gpus")
        return "cpu", workers, address
    if device == Device.cpu:
        _fail("--device cpu runs CPU actors: use --workers N" + ("" if gpus is None else " instead of --gpus"))
    actors = None
    if gpus is not None and gpus.strip().lower() != "all":
        try:
            actors = int(gpus)
        except ValueError:
            actors = 0
        if actors < 1:
            _fail(f"--gpus {gpus!r}: give all or a number >= 1")
    if address is None:
        from harness import env as envmod

        try:
            envmod.resolve_device("cuda")  # a local instance runs on this host's GPUs
        except envmod.NoGPUError as e:
            _fail(f"--gpus: {e}")
    return "cuda", actors, address


def _start_pool(scale, plugins: list[str], isolated: bool):
    """The Ray actors of a scale-out run (one clear error line if they cannot start)."""
    import time

    from harness.scaleout import ActorPool, PoolSpec, ScaleOutError

    dev, actors, address = scale
    t0 = time.perf_counter()
    console.print(f"starting Ray actors ({'a local instance' if address is None else address}) ...")
    try:
        pool = ActorPool(PoolSpec(device=dev, actors=actors, address=address, plugins=plugins, isolated=isolated))
    except ScaleOutError as e:
        _fail(str(e))
    console.print(f"{pool.count} Ray actor(s) on {', '.join(sorted({str(e.get('gpu_name')) for e in pool.envs}))} "
                  f"ready in {time.perf_counter() - t0:.1f} s")
    return pool


def _compare_run(pool, dev, device, settings, method_objs, specs, plugin, isolated, shape_list, lays, out, fresh,
                 label, only, baseline) -> None:
    """Open the store, measure (in this process, its sandbox, or the scale-out actors), summarize."""
    from harness import env as envmod
    from harness.results import ResultsError, ResultStore, read_results, read_samples, samples_dir
    from harness.runner import CompareRunner
    from harness.summary import print_summary

    env = pool.envs[0] if pool else envmod.collect(dev)
    # the store first: a run refused for its file (another device, another label) exits before this
    # process measures anything (the work model times a CPU matmul: its thread pool at exit can abort)
    if fresh and out.exists():
        out.unlink()
        import shutil

        shutil.rmtree(samples_dir(out), ignore_errors=True)
    try:
        store = ResultStore(out, run_id=uuid.uuid4().hex[:12])
    except ResultsError as e:
        _fail(f"{e}. Use --fresh to start over, or another --out.")
    prior = {r.get("gpu_uuid") for r in store.rows}
    if pool is None and store.resumed and prior and env.get("gpu_uuid") not in prior:
        _fail(f"{out} holds results from another device ({', '.join(sorted(map(str, prior)))}); "
              "use another --out or --fresh: runs on different GPUs never mix in one run")
    prior_kinds = {r.get("gpu_name") for r in store.rows} - {e.get("gpu_name") for e in (pool.envs if pool else [])}
    if pool is not None and store.resumed and prior_kinds:
        _fail(f"{out} holds results from another kind of device ({', '.join(sorted(map(str, prior_kinds)))}); "
              "use another --out or --fresh: a scale-out run resumes on GPUs of the same model only")
    settings.label = _run_label(store, label.strip(), out)
    if pool is None or dev == "cpu":  # an actor's GPU is not this process's to query
        _check_fits(shape_list, method_objs, len(lays), settings.caches, dev, env)
    work = _work_model(settings, method_objs, dev, env.get("gpu_name") if pool else None)
    if dev == "cpu":
        why = "requested" if device == Device.cpu else "no CUDA GPU is visible"
        console.print(f"[bold yellow]CPU path ({why}):[/] torch CPU methods only; results are labelled device=cpu "
                      "and are not GPU numbers. GPU-only methods are recorded as unsupported.")
        predicted = work.total_s(shape_list)
        if predicted > CPU_WARN_S:
            err_console.print(f"[yellow]warning:[/] these {len(shape_list)} shapes will take "
                              f"{format_duration(predicted)} or more on this CPU (a lower bound from their FLOPs at "
                              f"{work.flops_per_s / 1e9:.1f} GFLOP/s, measured on a 256^3 fp16 matmul; larger products "
                              "run slower); the smoke-cpu set is sized for a CPU")
    if store.resumed:
        echo(f"resuming run {store.run_id} in {out}: {len(store.done_groups())} group(s) already measured")
        _warn_methods_missing_from_done_groups(store, [m.name for m in method_objs], only)
    console.print(f"[bold]{env.get('gpu_name')}[/] | {len(shape_list)} shapes x {len(method_objs)} methods x "
                  f"{len(lays)} layouts | {', '.join(settings.modes)} / {', '.join(settings.caches)}"
                  f"{' | sandboxed worker' if isolated else ''}{f' | {pool.count} Ray actors' if pool else ''}"
                  f" -> {escape(str(out))}")
    eta = Eta(work, shape_list, workers=pool.count if pool else 1)
    progress = _progress_bar(eta)
    from harness.method import ContextLost
    from harness.sandbox import Evaluator

    evaluator = None
    try:
        with progress:
            reporter = _RichReporter(progress, len(shape_list), eta)
            if pool is not None:
                from harness.scaleout import ScaleOutRunner

                runner = ScaleOutRunner(settings, method_objs, specs, store, pool, reporter)
            else:
                if isolated:
                    evaluator = Evaluator(dev, env, plugins=plugin, reporter=reporter)
                runner = CompareRunner(settings, method_objs, store, env, reporter, evaluator=evaluator, specs=specs)
            runner.run()
    except KeyboardInterrupt:
        err_console.print(f"[yellow]interrupted:[/] finished groups are saved in {escape(str(out))}; "
                          "rerun the same command to resume")
        raise typer.Exit(130)
    except ContextLost as e:
        _fail(f"{e}. Finished groups are saved in {out}; rerun with --isolate on to sandbox the methods", code=3)
    finally:
        if evaluator is not None:
            evaluator.close()
    results = read_results(out).to_pandas()
    samples = read_samples(out).to_pandas()
    if baseline not in set(results["method"]):
        console.print(f"[yellow]baseline {baseline!r} was not measured in this run; speedups are shown vs 'torch'[/]")
        baseline = "torch"
    elif dev == "cpu" and not (results[results["method"] == baseline]["status"] == "ok").any():
        console.print(f"[yellow]baseline {baseline!r} has no CPU results; speedups are shown vs 'torch'[/]")
        baseline = "torch"
    print_summary(results, samples, baseline, console)
    echo(f"results: {out}  samples: {samples_dir(out)}/")


def _run_label(store, label: str, out: Path) -> str:
    """The run's label: the one given, else the one its finished rows carry. A resumed run keeps
    one label, so a second --label that differs is refused rather than mixed into the rows."""
    stored = sorted({r.get("run_label") for r in store.rows} - {None, ""})
    if label and stored and stored != [label]:
        _fail(f"{out} is run {store.run_id} labelled {stored[0]!r}; resume it without --label (or with the same), "
              "or use --fresh / another --out for a new run")
    return label or (stored[0] if stored else "")


def _work_model(settings, methods, dev: str, gpu_name: Optional[str] = None):
    """The time model behind the estimate and the progress bar's time left (``gpu_name``: the
    GPU the actors of a scale-out run hold, when this process need not have one)."""
    from harness import env as envmod
    from harness.progress import WorkModel

    per_shape = max((len(names) for names in settings.only.values()), default=0) if settings.only else 0
    runnable = [m for m in methods if dev in m.devices]
    entries = (min(per_shape, len(runnable)) if per_shape else len(runnable)) * len(settings.layouts)
    return WorkModel(flops_per_s=envmod.fp16_flops_per_s(dev, gpu_name), entries=max(entries, 1),
                     modes=tuple(settings.modes), caches=len(settings.caches), max_rounds=settings.max_rounds,
                     budget_s=settings.budget_s,
                     server_calls=settings.server_calls, qps=settings.qps)


@app.command("env")
def env_cmd(
    device: Device = typer.Option(Device.auto, help="auto, cuda or cpu."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
):
    """Print the environment a run would record: GPU, driver, CUDA, torch, cuBLAS, clocks."""
    from harness import env as envmod
    from harness.registry import load_plugins

    try:
        dev = envmod.resolve_device(device.value)
    except envmod.NoGPUError as e:
        _fail(str(e))
    load_plugins()
    info = envmod.collect(dev)
    if as_json:
        console.print_json(json.dumps(info, default=str))
        return
    from rich.table import Table

    t = Table(show_header=False)
    for k, v in info.items():
        t.add_row(k, str(v))
    console.print(t)


@app.command("methods")
def methods_cmd():
    """List the registered methods (baselines and kernel families)."""
    from rich.table import Table

    from harness.registry import entries

    t = Table("name", "default", "description")
    for e in entries().values():
        t.add_row(e.name, "yes" if e.default else "", e.help)
    console.print(t)


# Commands of other packages, found by module name (a source tree need not be installed) and
# through the ``hgemm_bench.commands`` entry-point group (pyproject.toml declares the built-ins
# there too). Each module exposes ``register(app: typer.Typer) -> None`` and imports nothing
# heavy at module level; a built-in whose package is not installed is skipped.
BUILTIN_COMMANDS = ("reports.cli", "kernels_search.search.cli", "kernels_search.search.build_cli",
                    "kernels_search.search.tune_cli")
COMMANDS_GROUP = "hgemm_bench.commands"


def mount_commands(target: typer.Typer, builtins: Sequence[str] = BUILTIN_COMMANDS,
                   group: str = COMMANDS_GROUP) -> list[str]:
    """Register every command plug-in on ``target``, each module once; returns their names.

    A built-in that is not installed is skipped without a word; one that fails to import for
    any other reason raises (a broken install should be seen). A third-party entry point that
    fails is reported on stderr and skipped, so it cannot take the whole CLI down."""
    from harness.registry import plugin_absent

    mounted: list[str] = []
    for mod in builtins:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if plugin_absent(e, mod):
                continue
            raise
        module.register(target)
        mounted.append(mod)
    for ep in metadata.entry_points(group=group):
        if ep.module in mounted:
            continue
        try:
            obj = ep.load()
            (obj if callable(obj) else obj.register)(target)
        except Exception as e:
            err_console.print(f"[yellow]warning:[/] command plug-in {ep.name} ({ep.value}) failed to load: "
                              f"{type(e).__name__}: {escape(str(e))}")
            continue
        mounted.append(ep.module)
    return mounted


mount_commands(app)


def main() -> None:
    """The console entry point: the app, then Python's own shutdown steps, then the exit code.

    Threads that native libraries start and never join (pyarrow's pools once a Parquet file is read, jemalloc's
    background thread, torch's) can abort the interpreter's final teardown: a refused run printed its one error line
    and then died with "terminate called without an active exception" (exit -6, not 2). So the steps of a normal
    exit that run Python code are taken here, in order (non-daemon threads joined, atexit handlers, streams
    flushed), and the process then ends without the native teardown."""
    import atexit
    import os
    import threading

    try:
        app()
        code = 0
    except SystemExit as e:
        code = e.code
    except BaseException as e:  # what Python would print and exit with (130 for an interrupt)
        import traceback

        traceback.print_exc()
        code = 130 if isinstance(e, KeyboardInterrupt) else 1
    if not isinstance(code, int):
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    threading._shutdown()  # what the interpreter does first at exit: join non-daemon threads
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
