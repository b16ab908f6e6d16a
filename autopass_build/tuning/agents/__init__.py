"""Agents that read compiler evidence and propose flags (`--strategy agent`).

| module      | what it holds                                                          |
|-------------|------------------------------------------------------------------------|
| context.py  | what agents see: hot units, knob table, remarks, tools for more        |
| roles.py    | analyst / planner / diagnoser and the records passed between them      |
| rules.py    | the offline rules agent (the default; deterministic)                   |
| llm.py      | LLM agents over any OpenAI-compatible endpoint, transcript replay,     |
|             | and the fallback to the rules agent                                    |
"""

from __future__ import annotations

import os

from autopass_build.config import AgentConfig
from autopass_build.core.names import ENV_MODEL
from autopass_build.tuning.agents.context import Context, HotUnit, Trial
from autopass_build.tuning.agents.llm import (
    AgentUnavailable,
    FallbackBackend,
    LLMBackend,
    OpenAITransport,
    ReplayTransport,
    ResumeTransport,
    Transcript,
    Transport,
    environment_secrets,
)
from autopass_build.tuning.agents.roles import Diagnosis, Lesson, Proposal
from autopass_build.tuning.agents.rules import RulesBackend

TRANSCRIPT = "transcript.jsonl"


def make_backend(config: AgentConfig, run_folder: str, progress=None, resume: bool = False):
    """The backend [agent] asks for; LLM backends fall back to the rules agent.  On
    `resume`, an LLM run's own transcript is replayed before the endpoint is asked."""
    if config.backend == "rules":
        return RulesBackend()
    key = os.environ.get(config.api_key_env, "")
    transcript = Transcript(os.path.join(run_folder, TRANSCRIPT),
                            environment_secrets() + [key])
    transport: Transport
    if config.backend == "replay":
        transport = ReplayTransport(config.transcript)
    else:
        model = config.model or os.environ.get(ENV_MODEL, "")
        if not model:
            raise AgentUnavailable("no model: set [agent].model or AUTOPASS_MODEL")
        transport = OpenAITransport(model, config.base_url or os.environ.get("OPENAI_BASE_URL", ""),
                                    key, config.timeout, config.retries)
        recorded = os.path.join(run_folder, TRANSCRIPT)
        if resume and os.path.exists(recorded):
            transport = ResumeTransport(ReplayTransport(recorded), transport)
    llm = LLMBackend(transport, transcript, config.max_calls, config.max_tokens)
    llm.name = config.backend
    return FallbackBackend(llm, transcript, progress)


__all__ = ["AgentUnavailable", "Context", "Diagnosis", "FallbackBackend", "HotUnit",
           "LLMBackend", "Lesson", "Proposal", "RulesBackend", "Trial", "make_backend"]
