"""The contrastive prompt builder: contents, selection of examples, determinism, budgets.

A prompt that lost the ABI, a rule, the best kernel, its figures or the compiler error would still
"work" with a model but teach it the wrong task; each test names one piece that must be there (or
must not be, e.g. a kernel of the wrong layout or an over-budget source).
"""

from __future__ import annotations

import random

import pytest

from kernels_search.llm.prompt import (KernelExample, PromptContext, PromptOptions, build_prompt, clip_middle,
                                       select_examples)


def ex(name, m, n, k, speedup, layout="nn", verdict="pass", regs=96, spills=0, src=None):
    return KernelExample(name=name, m=m, n=n, k=k, layout=layout, speedup=speedup, verdict=verdict,
                         registers=regs, spill_bytes=spills,
                         source=src if src is not None else f"// source of {name}\nextern \"C\" int hgemm_run() {{}}\n")


EXAMPLES = [
    ex("best", 256, 256, 1024, 1.31, regs=128, spills=0),
    ex("mid", 256, 256, 1024, 0.92, regs=168, spills=24),
    ex("slow", 256, 256, 1024, 0.41, regs=255, spills=512),
    ex("wrong", 256, 256, 1024, None, verdict="gate_failed: wrong result"),
    ex("other-layout", 256, 256, 1024, 2.5, layout="tn"),
    ex("near", 512, 256, 1024, 1.12),
    ex("near-worse", 512, 256, 1024, 0.8),
    ex("far", 16384, 64, 16384, 3.0),
]


def test_task_statement_and_rules():
    p = build_prompt(256, 256, 1024, "nn", PromptContext(examples=EXAMPLES))
    t = p.text
    assert "M=256, N=256, K=1024" in t
    assert 'extern "C"' in t and "hgemm_run" in t and "hgemm_workspace" in t
    assert "size_t ws_bytes" in t  # the ABI header itself is pasted
    assert "FP32" in t  # fp32 accumulation required
    assert "cudaStreamCreate" in t and "`stream`" in t
    assert "No caching across calls" in t
    assert "Write every element of C" in t
    assert "```cuda" in p.user.splitlines()[-3] or "single fenced code block" in t
    assert t.rstrip().endswith("before the block.")
    assert p.messages[0]["role"] == "system" and p.messages[1]["content"] == p.user


def test_contrastive_selection():
    p = build_prompt(256, 256, 1024, "nn", PromptContext(examples=EXAMPLES))
    t = p.user
    assert p.examples_shown[0] == "best"
    assert "speedup 1.310x" in t and "ptxas 128 registers" in t
    # worse ones: the contrast includes a spilling one and the wrong one, with their figures
    assert "512 bytes spilled" in t or "24 bytes spilled" in t
    assert "gate gate_failed: wrong result" in t
    # nearby: best of the nearest other shape, not its worse kernel, not the far shape
    assert "near" in p.examples_shown and "near-worse" not in p.examples_shown
    assert "far" not in p.examples_shown
    # a tn kernel is not this layout's "best"
    assert t.index("### Best") < t.index("source of best") < t.index("## Worse")
    assert "other-layout" not in p.examples_shown[:3]


def test_both_layouts_mentioned_and_selected():
    p = build_prompt(256, 256, 1024, ("nn", "tn"), PromptContext(examples=EXAMPLES))
    assert 'layout 0 ("nn")' in p.user and 'layout 1 ("tn")' in p.user
    assert p.examples_shown[0] == "other-layout"  # the best over both layouts
    assert p.layout == "nn,tn"
    with pytest.raises(ValueError):
        build_prompt(1, 1, 1, "nt")


def test_select_examples_orders_best_first():
    best, worse, nearby = select_examples(EXAMPLES, 256, 256, 1024, "nn", PromptOptions(n_worse=3))
    assert [e.name for e in best] == ["best"]
    assert [e.name for e in worse] == ["mid", "slow", "wrong"]
    assert [e.name for e in nearby][0] == "near"


def test_deterministic_whatever_the_input_order():
    ctx = PromptContext(examples=EXAMPLES, last_compile_error="kernel.cu(3): error: x undefined")
    ref = build_prompt(256, 256, 1024, "nn", ctx)
    rng = random.Random(0)
    for _ in range(5):
        shuffled = list(EXAMPLES)
        rng.shuffle(shuffled)
        p = build_prompt(256, 256, 1024, "nn", PromptContext(examples=shuffled,
                                                             last_compile_error=ctx.last_compile_error))
        assert p.text == ref.text and p.hash == ref.hash


def test_last_compiler_error_tail():
    log = "\n".join(f"line {i}" for i in range(5000)) + "\nkernel.cu(42): error: identifier \"acc\" is undefined"
    p = build_prompt(64, 64, 64, "nn", PromptContext(last_compile_error=log), PromptOptions(max_error_chars=500))
    assert "## Last compiler error" in p.user
    assert 'identifier "acc" is undefined' in p.user
    assert "line 10\n" not in p.user  # only the tail


def test_no_examples_first_kernel():
    p = build_prompt(64, 64, 64, "tn")
    assert "No kernel has been measured" in p.user and p.examples_shown == ()
    assert "Last compiler error" not in p.user


def test_budgets():
    big = "x" * 100_000
    exs = [ex("huge", 64, 64, 64, 1.0, src=big), ex("second", 64, 64, 64, 0.5, src=big)]
    p = build_prompt(64, 64, 64, "nn", PromptContext(examples=exs),
                     PromptOptions(max_source_chars=10_000, max_prompt_chars=20_000))
    assert "characters" in p.user and "omitted" in p.user  # cut in the middle
    assert len(p.text) < 25_000
    assert "(source omitted: prompt budget)" in p.user  # second did not fit
    assert clip_middle("abc", 10) == "abc"
    c = clip_middle("\n".join(str(i) for i in range(10_000)), 1000)
    assert len(c) <= 1000 and c.startswith("0\n1\n") and c.rstrip().endswith("9999")


def test_from_mapping_db_like_row():
    e = KernelExample.from_mapping({"name": "smalltile:bm=32", "m": 64.0, "n": 64, "k": 128, "layout": "tn",
                                    "speedup": float("nan"), "resources": {"max_registers": 80, "spill_bytes": 8},
                                    "extra": 1})
    assert (e.m, e.registers, e.spill_bytes, e.speedup) == (64, 80, 8, None)


def test_one_entry_per_kernel_across_layouts():
    """A kernel measured in both layouts is shown once (its better layout), never twice."""
    exs = [ex("k1", 64, 64, 64, 1.2, "nn"), ex("k1", 64, 64, 64, 0.9, "tn"), ex("k2", 64, 64, 64, 0.5, "tn")]
    p = build_prompt(64, 64, 64, ("nn", "tn"), PromptContext(examples=exs))
    assert p.examples_shown == ("k1", "k2") and p.user.count("source of k1") == 1
