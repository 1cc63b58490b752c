"""LLM backends on CPU: the OpenAI-compatible HTTP client against a local OpenAI-protocol server
started by the test, the vLLM offline backend against a stand-in ``vllm`` module (vLLM itself
cannot run here) and its "not installed" message, and transformers with a tiny randomly
initialised model (no download).

The fake server counts requests and can fail, stall or answer garbage on demand, so the tests
can fail for a client that does not retry, retries forever, loses ``n``, or mixes up the order
of prompts.
"""

from __future__ import annotations

import json
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kernels_search.llm.backends import (BackendError, BackendUnavailable, OpenAIBackend, VLLMBackend,
                                         make_backend)


class FakeOpenAI:
    """An OpenAI-protocol server on 127.0.0.1 (random port). ``script`` is a list of actions
    consumed one per POST: "ok", "500", "400", "garbage-json", "short" (one choice fewer than n),
    "stall" (sleeps past the client timeout); after it runs out, "ok". Completions echo which
    prompt they answer (``reply(prompt_text, i)``)."""

    def __init__(self, reply=None, script=(), model="fake-model"):
        self.reply = reply or (lambda prompt, i: f"answer {i} to: {prompt[-20:]}")
        self.script = list(script)
        self.model = model
        self.posts: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, payload: bytes):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [{"id": outer.model}]}).encode())
                else:
                    self._send(404, b"{}")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.posts.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                    action = outer.script.pop(0) if outer.script else "ok"
                if action == "stall":
                    import time
                    time.sleep(1.5)
                    action = "ok"
                if action in ("500", "400", "429"):
                    return self._send(int(action), b'{"error": "scripted"}')
                if action == "400ctx":  # what vLLM says when prompt + max_tokens exceed the context
                    return self._send(400, b'{"object": "error", "message": "This model\'s maximum context '
                                           b'length is 4096 tokens. However, you requested 9000 tokens."}')
                if action == "garbage-json":
                    return self._send(200, b"\x00not json at all")
                n = int(body.get("n", 1)) - (1 if action == "short" else 0)
                if "messages" in body:
                    prompt = body["messages"][-1]["content"]
                    choices = [{"index": i, "message": {"role": "assistant", "content": outer.reply(prompt, i)},
                                "finish_reason": "stop"} for i in range(n)]
                else:
                    prompt = body["prompt"]
                    choices = [{"index": i, "text": outer.reply(prompt, i), "finish_reason": "length"}
                               for i in range(n)]
                choices.reverse()  # servers need not return choices in index order
                self._send(200, json.dumps({"id": "x", "object": "chat.completion", "model": outer.model,
                                            "choices": choices,
                                            "usage": {"prompt_tokens": 7, "completion_tokens": 5 * n}}).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_openai_chat_n_and_order():
    with FakeOpenAI() as srv:
        be = OpenAIBackend(srv.url, api_key="k123", backoff_s=0.01, timeout_s=5)
        assert be.model == "fake-model"  # asked GET /models
        out = be.generate([[{"role": "system", "content": "s"}, {"role": "user", "content": "prompt A"}],
                           "prompt B"], n=3, max_tokens=64, temperature=0.7)
        assert out == [f"answer {i} to: prompt A" for i in range(3)] + [f"answer {i} to: prompt B" for i in range(3)]
        assert len(srv.posts) == 2
        p = srv.posts[0]
        assert p["path"] == "/v1/chat/completions" and p["auth"] == "Bearer k123"
        assert (p["n"], p["max_tokens"], p["temperature"], p["model"]) == (3, 64, 0.7, "fake-model")
        assert be.usage["completion_tokens"] == 30


def test_openai_text_completions_endpoint():
    with FakeOpenAI() as srv:
        be = OpenAIBackend(srv.url, model="m", endpoint="completions", backoff_s=0.01)
        out = be.generate(["hello world"], n=2, max_tokens=8, temperature=0.0)
        assert out == ["answer 0 to: hello world", "answer 1 to: hello world"]
        assert srv.posts[0]["path"] == "/v1/completions" and srv.posts[0]["prompt"] == "hello world"


def test_openai_retries_transient_errors_bounded():
    with FakeOpenAI(script=["500", "429", "garbage-json", "ok"]) as srv:
        be = OpenAIBackend(srv.url, model="m", retries=3, backoff_s=0.01)
        assert be.generate(["p"], n=1, max_tokens=8, temperature=0.5) == ["answer 0 to: p"]
        assert len(srv.posts) == 4
    with FakeOpenAI(script=["500"] * 10) as srv:
        be = OpenAIBackend(srv.url, model="m", retries=2, backoff_s=0.01)
        with pytest.raises(BackendError, match="gave up after 3 attempts"):
            be.generate(["p"], n=1, max_tokens=8, temperature=0.5)
        assert len(srv.posts) == 3  # bounded: 1 + retries


def test_openai_client_error_not_retried():
    with FakeOpenAI(script=["400"]) as srv:
        be = OpenAIBackend(srv.url, model="m", retries=5, backoff_s=0.01)
        with pytest.raises(BackendError, match="HTTP 400"):
            be.generate(["p"], n=1, max_tokens=8, temperature=0.5)
        assert len(srv.posts) == 1


def test_openai_timeout_then_success():
    with FakeOpenAI(script=["stall"]) as srv:
        be = OpenAIBackend(srv.url, model="m", timeout_s=0.5, retries=1, backoff_s=0.01)
        assert be.generate(["p"], n=1, max_tokens=8, temperature=0.5) == ["answer 0 to: p"]
        assert len(srv.posts) == 2


def test_openai_shrinks_max_tokens_on_context_overflow():
    with FakeOpenAI(script=["400ctx", "400ctx"]) as srv:
        be = OpenAIBackend(srv.url, model="m", backoff_s=0.01)
        assert be.generate(["p"], n=1, max_tokens=8192, temperature=0.5) == ["answer 0 to: p"]
        assert [p["max_tokens"] for p in srv.posts] == [8192, 4096, 2048] and be.shrunk_max_tokens == 2048
    with FakeOpenAI(script=["400ctx"] * 10) as srv:  # bounded: gives up
        with pytest.raises(BackendError, match="maximum context"):
            OpenAIBackend(srv.url, model="m", backoff_s=0.01).generate(["p"], 1, 8192, 0.5)
        assert len(srv.posts) == 4


def test_openai_tops_up_short_replies():
    with FakeOpenAI(script=["short"]) as srv:
        be = OpenAIBackend(srv.url, model="m", backoff_s=0.01)
        out = be.generate(["p"], n=4, max_tokens=8, temperature=0.5)
        assert len(out) == 4
        assert [p["n"] for p in srv.posts] == [4, 1]


def test_openai_unreachable_server():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(BackendError):
        OpenAIBackend(f"http://127.0.0.1:{port}/v1", model="m", retries=1, backoff_s=0.01,
                      timeout_s=2).generate(["p"], 1, 8, 0.5)


def test_make_backend_validates():
    with pytest.raises(ValueError, match="--llm-url"):
        make_backend("openai")
    with pytest.raises(ValueError, match="unknown LLM backend"):
        make_backend("gpt")
    with pytest.raises(ValueError):
        OpenAIBackend("http://127.0.0.1:9/v1", model="m").generate(["p"], n=0, max_tokens=8, temperature=0.5)


# ------------------------------------------------------------------------------------------ vLLM
def test_vllm_absent_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(BackendUnavailable, match="vllm serve"):
        VLLMBackend("some/model")


def test_vllm_offline_with_stand_in_module(monkeypatch):
    """The backend's use of vLLM's API (LLM, SamplingParams, chat/generate, outputs[i].text)."""
    calls = {}

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        def __init__(self, model, **kw):
            calls["init"] = (model, kw)

        def _outs(self, prompts, params, tag):
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"{tag}{j}:{i}")
                                                   for j in range(params.kw["n"])]) for i, _ in enumerate(prompts)]

        def chat(self, messages, params, use_tqdm=False):
            calls["chat"] = (messages, params.kw)
            return self._outs(messages, params, "c")

        def generate(self, prompts, params, use_tqdm=False):
            calls["generate"] = (prompts, params.kw)
            return self._outs(prompts, params, "g")

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    be = make_backend("vllm", model="org/model", tensor_parallel_size=2)
    assert calls["init"] == ("org/model", {"tensor_parallel_size": 2})
    out = be.generate(["flat", [{"role": "user", "content": "chat"}]], n=2, max_tokens=16, temperature=0.9)
    # prompt order kept although chat and flat prompts go through different engine calls
    assert out == ["g0:0", "g1:0", "c0:0", "c1:0"]
    assert calls["chat"][1] == {"n": 2, "max_tokens": 16, "temperature": 0.9}
    assert calls["generate"][0] == ["flat"]


# ------------------------------------------------------------------------------------ transformers
def tiny_lm(n_positions=256):
    """A 1-layer GPT-2 with random weights and a byte-level tokenizer built in code (no download)."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers

    byte_chars = pre_tokenizers.ByteLevel.alphabet()
    vocab = {c: i for i, c in enumerate(sorted(byte_chars))}
    vocab["<|endoftext|>"] = len(vocab)
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                                  pad_token="<|endoftext|>")
    import torch

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=len(vocab), n_positions=n_positions, n_embd=32, n_layer=1, n_head=2,
                                  bos_token_id=vocab["<|endoftext|>"], eos_token_id=vocab["<|endoftext|>"])
    return transformers.GPT2LMHeadModel(cfg), hf_tok


def test_transformers_tiny_random_model():
    from kernels_search.llm.backends import TransformersBackend

    model, tok = tiny_lm()
    be = TransformersBackend(model, tok, device="cpu", seed=0, model_name="tiny-gpt2")
    assert be.model == "tiny-gpt2"
    long_prompt = [{"role": "system", "content": "s" * 50}, {"role": "user", "content": "x" * 1000}]
    out = be.generate(["short prompt", long_prompt], n=2, max_tokens=12, temperature=1.0)
    assert len(out) == 4 and all(isinstance(t, str) for t in out)
    assert be.truncated_prompts == 1  # the 1000-char prompt was cut to fit 256 positions
    greedy = be.generate(["abc"], n=1, max_tokens=8, temperature=0.0)
    assert greedy == be.generate(["abc"], n=1, max_tokens=8, temperature=0.0)


def test_transformers_chat_template_path():
    """With a chat template the messages are rendered by it (system and user both reach the model)."""
    from kernels_search.llm.backends import TransformersBackend

    model, tok = tiny_lm()
    tok.chat_template = "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}[assistant]"
    be = TransformersBackend(model, tok, device="cpu", seed=0)
    ids = be._encode([{"role": "system", "content": "SYS"}, {"role": "user", "content": "USR"}])
    assert tok.decode(ids) == "[system]SYS[user]USR[assistant]"
    assert len(be.generate([[{"role": "user", "content": "hi"}]], n=2, max_tokens=4, temperature=0.8)) == 2
