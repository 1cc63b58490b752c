"""LLM backends behind one interface: ``generate(prompts, n, max_tokens, temperature) -> list[str]``.

``prompts`` are flat strings or chat message lists (``[{"role": ..., "content": ...}]``, what
``Prompt.messages`` gives). The result holds ``n`` completions per prompt, prompt-major:
``out[i * n + j]`` is completion ``j`` of prompt ``i``. A backend that cannot produce them (server
unreachable after its retries, a bad reply) raises ``BackendError``; a completion that is merely
garbage is returned as it came (the parser judges it).

* ``OpenAIBackend``: any OpenAI-compatible server (``vllm serve MODEL``, SGLang, llama.cpp's
  server, OpenAI itself) over HTTP with the standard library only: ``/v1/chat/completions`` (or
  ``/v1/completions`` for flat prompts with ``endpoint="completions"``), per-request timeout,
  retries with exponential backoff on connection errors, 408/409/429 and 5xx, and top-up requests
  when a server returns fewer than ``n`` choices.
* ``VLLMBackend``: vLLM's offline engine in this process (``vllm.LLM``), imported lazily; without
  vLLM it raises ``BackendUnavailable`` saying how to get it or to use a server instead.
* ``TransformersBackend``: ``AutoModelForCausalLM`` in process, from a path/name or a given model
  object and tokenizer; prompts longer than the model's context are cut from the left (kept: the
  end, where the instructions for the reply are) and that is counted in ``truncated_prompts``.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, Sequence, Union, runtime_checkable

PromptInput = Union[str, Sequence[dict]]


class BackendError(RuntimeError):
    """The backend could not produce completions (after its retries)."""


class BackendUnavailable(BackendError):
    """The backend's library is not installed or cannot start here."""


@runtime_checkable
class Backend(Protocol):
    name: str  # "openai", "vllm", "transformers", ...
    model: str  # what the trajectory rows record as the model

    def generate(self, prompts: Sequence[PromptInput], n: int, max_tokens: int,
                 temperature: float) -> list[str]: ...


def flatten(prompt: PromptInput) -> str:
    """A chat message list as one string (for backends without a chat template)."""
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(str(m.get("content", "")) for m in prompt)


def as_messages(prompt: PromptInput) -> list[dict]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]


def _check_args(prompts, n, max_tokens, temperature) -> None:
    if n < 1 or max_tokens < 1 or temperature < 0:
        raise ValueError(f"need n >= 1, max_tokens >= 1, temperature >= 0 (got {n}, {max_tokens}, {temperature})")
    if isinstance(prompts, (str, bytes)):
        raise TypeError("prompts must be a sequence of prompts, not one string")


# ------------------------------------------------------------------------------------ OpenAI HTTP
class OpenAIBackend:
    """Chat (or text) completions from an OpenAI-compatible server.

    ``base_url`` is the API root, e.g. ``http://127.0.0.1:8000/v1`` (what ``vllm serve`` listens
    on). ``model=None`` asks the server (``GET /models``) and takes the first model it serves.
    ``api_key`` defaults to ``$OPENAI_API_KEY`` (vLLM accepts anything unless started with
    ``--api-key``)."""

    name = "openai"
    RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None, *,
                 endpoint: str = "chat", timeout_s: float = 600.0, retries: int = 3,
                 backoff_s: float = 1.0, concurrency: int = 8, max_top_ups: int = 3,
                 seed: int | None = None, extra_body: dict | None = None):
        if endpoint not in ("chat", "completions"):
            raise ValueError("endpoint must be 'chat' or 'completions'")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "EMPTY")
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.concurrency = max(1, concurrency)
        self.max_top_ups = max_top_ups
        self.seed = seed
        self.extra_body = dict(extra_body or {})
        self.requests_made = 0
        self.shrunk_max_tokens: int | None = None  # set when the server refused max_tokens as too long
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.model = model or self._first_model()

    # -- HTTP
    def _request(self, method: str, path: str, body: dict | None = None) -> dict:
        url = self.base_url + path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"}
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * (2 ** (attempt - 1)) * (1 + 0.25 * random.random()))
            self.requests_made += 1
            req = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as e:
                detail = e.read()[:500].decode(errors="replace") if e.fp else ""
                last = f"HTTP {e.code} from {url}: {detail}"
                if e.code in self.RETRY_STATUS:
                    continue
                raise BackendError(last) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
                last = f"{type(e).__name__} talking to {url}: {getattr(e, 'reason', e)}"
                continue
            try:
                out = json.loads(raw)
            except ValueError:
                last = f"reply from {url} is not JSON: {raw[:200]!r}"
                continue
            if not isinstance(out, dict):
                last = f"reply from {url} is not a JSON object"
                continue
            return out
        raise BackendError(f"{last} (gave up after {self.retries + 1} attempts)")

    def _first_model(self) -> str:
        out = self._request("GET", "/models")
        try:
            return str(out["data"][0]["id"])
        except (KeyError, IndexError, TypeError):
            raise BackendError(f"{self.base_url}/models lists no model; pass model=") from None

    def _one(self, prompt: PromptInput, n: int, max_tokens: int, temperature: float) -> list[str]:
        texts: list[str] = []
        shrinks = 0
        for _ in range(1 + self.max_top_ups + 3):
            if len(texts) >= n:
                return texts
            want = n - len(texts)
            body: dict[str, Any] = {"model": self.model, "n": want, "max_tokens": max_tokens,
                                    "temperature": temperature, **self.extra_body}
            if self.seed is not None:
                body["seed"] = self.seed
            try:
                if self.endpoint == "chat":
                    body["messages"] = as_messages(prompt)
                    out = self._request("POST", "/chat/completions", body)
                else:
                    body["prompt"] = flatten(prompt)
                    out = self._request("POST", "/completions", body)
            except BackendError as e:
                # prompt + max_tokens over the model's context (vLLM answers 400): ask for less
                err = str(e).lower()
                if "http 400" in err and ("context" in err or "max_tokens" in err) and shrinks < 3 \
                        and max_tokens > 512:
                    max_tokens, shrinks = max(512, max_tokens // 2), shrinks + 1
                    self.shrunk_max_tokens = max_tokens
                    continue
                raise
            choices = out.get("choices")
            if not isinstance(choices, list):
                raise BackendError(f"reply has no choices list: {str(out)[:200]}")
            usage = out.get("usage") or {}
            for key in self.usage:
                if isinstance(usage.get(key), int):
                    self.usage[key] += usage[key]
            for c in sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)[:want]:
                if not isinstance(c, dict):
                    texts.append("")
                elif self.endpoint == "chat":
                    msg = c.get("message") or {}
                    content = msg.get("content") if isinstance(msg, dict) else None
                    texts.append(content if isinstance(content, str) else "")
                else:
                    texts.append(c.get("text") if isinstance(c.get("text"), str) else "")
        if len(texts) >= n:
            return texts
        raise BackendError(f"server returned {len(texts)} of {n} completions after {self.max_top_ups} top-ups")

    def generate(self, prompts: Sequence[PromptInput], n: int = 1, max_tokens: int = 4096,
                 temperature: float = 0.8) -> list[str]:
        _check_args(prompts, n, max_tokens, temperature)
        if not prompts:
            return []
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts))) as pool:
            groups = list(pool.map(lambda p: self._one(p, n, max_tokens, temperature), prompts))
        return [t for g in groups for t in g]


# ------------------------------------------------------------------------------ vLLM offline engine
class VLLMBackend:
    """vLLM's offline engine in this process. ``engine_kwargs`` go to ``vllm.LLM`` (e.g.
    ``tensor_parallel_size``, ``max_model_len``, ``gpu_memory_utilization``). Chat prompts use
    ``LLM.chat`` (the model's chat template), flat ones ``LLM.generate``."""

    name = "vllm"

    def __init__(self, model: str, *, seed: int | None = None, llm: Any = None, **engine_kwargs):
        self.model = model
        self.seed = seed
        try:
            import vllm  # noqa: F401  (lazy: heavy, GPU-only)
        except ImportError as e:
            raise BackendUnavailable(
                f"vLLM is not installed here ({e}). Install it on a GPU machine (pip install vllm), or "
                "start `vllm serve MODEL` and use the OpenAI-compatible backend (--llm-backend openai "
                "--llm-url http://HOST:8000/v1)."
            ) from None
        self._vllm = vllm
        self.llm = llm if llm is not None else vllm.LLM(model=model, **engine_kwargs)

    def generate(self, prompts: Sequence[PromptInput], n: int = 1, max_tokens: int = 4096,
                 temperature: float = 0.8) -> list[str]:
        _check_args(prompts, n, max_tokens, temperature)
        if not prompts:
            return []
        kw: dict[str, Any] = {"n": n, "max_tokens": max_tokens, "temperature": temperature}
        if self.seed is not None:
            kw["seed"] = self.seed
        params = self._vllm.SamplingParams(**kw)
        results: list[Any] = [None] * len(prompts)
        chat_idx = [i for i, p in enumerate(prompts) if not isinstance(p, str)]
        flat_idx = [i for i, p in enumerate(prompts) if isinstance(p, str)]
        try:
            if chat_idx:
                outs = self.llm.chat([as_messages(prompts[i]) for i in chat_idx], params, use_tqdm=False)
                for i, o in zip(chat_idx, outs):
                    results[i] = o
            if flat_idx:
                outs = self.llm.generate([prompts[i] for i in flat_idx], params, use_tqdm=False)
                for i, o in zip(flat_idx, outs):
                    results[i] = o
        except Exception as e:  # engine errors become backend errors; the search goes on
            raise BackendError(f"vLLM generate failed: {type(e).__name__}: {e}") from e
        texts: list[str] = []
        for r in results:
            got = [getattr(c, "text", "") or "" for c in (getattr(r, "outputs", None) or [])][:n]
            if len(got) < n:
                raise BackendError(f"vLLM returned {len(got)} of {n} completions")
            texts.extend(got)
        return texts


# ------------------------------------------------------------------------------ transformers
class TransformersBackend:
    """``transformers`` causal LM in this process.

    Give ``model`` as a path/hub name (loaded with ``AutoModelForCausalLM.from_pretrained``; pass
    ``local_files_only=True`` in ``load_kwargs`` to forbid downloads) or as a model object, with a
    ``tokenizer`` object or path. Chat prompts go through the tokenizer's chat template when it
    has one, else they are flattened."""

    name = "transformers"

    def __init__(self, model: Any, tokenizer: Any = None, *, device: str | None = None,
                 seed: int | None = None, model_name: str | None = None, batch_size: int = 1,
                 **load_kwargs):
        try:
            import torch
            import transformers
        except ImportError as e:
            raise BackendUnavailable(f"transformers is not installed ({e}): pip install 'hgemm-bench[llm]'") from None
        self._torch = torch
        if isinstance(model, (str, os.PathLike)):
            path = str(model)
            self.hf_model = transformers.AutoModelForCausalLM.from_pretrained(path, **load_kwargs)
            tokenizer = tokenizer if tokenizer is not None else path
            self.model = model_name or path
        else:
            self.hf_model = model
            cfg = getattr(model, "config", None)
            self.model = model_name or getattr(cfg, "_name_or_path", "") or type(model).__name__
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer), **{
                k: v for k, v in load_kwargs.items() if k in ("local_files_only", "revision", "trust_remote_code")})
        if tokenizer is None:
            raise ValueError("a tokenizer (object or path) is needed with a model object")
        self.tokenizer = tokenizer
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.hf_model.to(self.device)
        self.hf_model.eval()
        self.seed = seed
        self.batch_size = max(1, batch_size)
        self.truncated_prompts = 0

    def _context_len(self) -> int | None:
        cfg = getattr(self.hf_model, "config", None)
        for attr in ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len"):
            v = getattr(cfg, attr, None)
            if isinstance(v, int) and v > 0:
                return v
        return None

    def _encode(self, prompt: PromptInput) -> list[int]:
        tok = self.tokenizer
        if not isinstance(prompt, str) and getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(as_messages(prompt), add_generation_prompt=True, tokenize=True)
            if hasattr(ids, "keys"):  # BatchEncoding in newer versions
                ids = ids["input_ids"]
            return list(ids)
        return list(tok(flatten(prompt), add_special_tokens=True)["input_ids"])

    def generate(self, prompts: Sequence[PromptInput], n: int = 1, max_tokens: int = 4096,
                 temperature: float = 0.8) -> list[str]:
        _check_args(prompts, n, max_tokens, temperature)
        torch = self._torch
        ctx = self._context_len()
        if ctx is not None:
            max_tokens = min(max_tokens, max(1, ctx // 2))
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
        if self.seed is not None:
            torch.manual_seed(self.seed)
        texts: list[str] = []
        for prompt in prompts:
            ids = self._encode(prompt)
            if ctx is not None and len(ids) + max_tokens > ctx:
                ids = ids[len(ids) - (ctx - max_tokens):]
                self.truncated_prompts += 1
            inp = torch.tensor([ids], dtype=torch.long, device=self.device)
            kw: dict[str, Any] = dict(max_new_tokens=max_tokens, num_return_sequences=n, pad_token_id=pad,
                                      attention_mask=torch.ones_like(inp))
            if temperature > 0:
                kw.update(do_sample=True, temperature=temperature, top_k=0)
            else:
                kw.update(do_sample=False)
                if n > 1:
                    kw.update(num_beams=n)
            try:
                with torch.no_grad():
                    out = self.hf_model.generate(inp, **kw)
            except Exception as e:
                raise BackendError(f"transformers generate failed: {type(e).__name__}: {e}") from e
            for row in out:
                texts.append(self.tokenizer.decode(row[len(ids):].tolist(), skip_special_tokens=True))
        return texts


def make_backend(kind: str, *, url: str | None = None, model: str | None = None,
                 api_key: str | None = None, **kwargs) -> Backend:
    """The backend a CLI names: ``openai`` (needs ``url``), ``vllm`` or ``transformers`` (need
    ``model``)."""
    if kind == "openai":
        if not url:
            raise ValueError("--llm-backend openai needs --llm-url (e.g. http://127.0.0.1:8000/v1)")
        return OpenAIBackend(url, model, api_key, **kwargs)
    if kind == "vllm":
        if not model:
            raise ValueError("--llm-backend vllm needs --llm-model")
        return VLLMBackend(model, **kwargs)
    if kind == "transformers":
        if not model:
            raise ValueError("--llm-backend transformers needs --llm-model (a path or name)")
        return TransformersBackend(model, **kwargs)
    raise ValueError(f"unknown LLM backend {kind!r}: openai, vllm or transformers")
