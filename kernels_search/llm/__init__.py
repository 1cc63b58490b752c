"""Opt-in LLM proposer (``--llm``): contrastive prompts, backends, parsing, trajectories.

* ``prompt``: ``build_prompt(m, n, k, layouts, PromptContext)`` -> ``Prompt`` (deterministic);
* ``parse``: ``parse_completion(text)`` -> ``ParsedCompletion`` (never raises), ``static_check``;
* ``backends``: ``OpenAIBackend``, ``VLLMBackend``, ``TransformersBackend``, ``make_backend``;
  all ``generate(prompts, n, max_tokens, temperature) -> list[str]``;
* ``trajectories``: ``TrajectoryStore`` (append-only Parquet, ``load``, ``export_grpo``);
* ``kernels`` / ``plugin``: accepted sources as ``llm:<hash12>`` specs for the evaluator worker;
* ``proposer``: ``LLMProposer`` (the search's ``Proposer``: ``propose``, ``observe``,
  ``record_reward``) and ``context_from_db``.

Only the standard library and pyarrow are needed at import time; transformers and vLLM are
imported when their backend is built.
"""

from kernels_search.llm.backends import (Backend, BackendError, BackendUnavailable, OpenAIBackend,
                                         TransformersBackend, VLLMBackend, make_backend)
from kernels_search.llm.kernels import KernelStore
from kernels_search.llm.parse import ParsedCompletion, parse_completion, static_check
from kernels_search.llm.prompt import KernelExample, Prompt, PromptContext, PromptOptions, build_prompt
from kernels_search.llm.trajectories import TrajectoryStore

__all__ = [
    "Backend", "BackendError", "BackendUnavailable", "OpenAIBackend", "TransformersBackend", "VLLMBackend",
    "make_backend", "KernelStore", "ParsedCompletion", "parse_completion", "static_check", "KernelExample",
    "Prompt", "PromptContext", "PromptOptions", "build_prompt", "TrajectoryStore",
]
