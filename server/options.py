"""The options many judging tools share, described once: each tool's listing names them without a
description, and the server's instructions (sent once, at initialize) say what they do."""

from __future__ import annotations

SHARED_OPTIONS: dict[str, str] = {
    "cache": "Default true; false: ask the model afresh, bypassing the result cache.",
    "samples": "Default 1; ask n times at once; adds the spread (scores) or the vote (verdicts).",
    "models": "A jury of 2–8 models, e.g. [\"anthropic:claude-sonnet-4-5\", \"openai:gpt-4o\"]: each judges; adds "
              "their verdicts and agreement.",
    "expected_score": "Default false; true: also report the log-probability-weighted score (G-Eval) as "
                      "expected_score, where the backend gives log-probabilities.",
    "background": "Default false; true: run as a job, returning {job_id} at once; get_job gives the result.",
}
# The defaults the descriptions above state: a tool's listing leaves out a shared option's default when it is this.
SHARED_DEFAULTS: dict[str, object] = {"cache": True, "samples": 1, "expected_score": False, "background": False}

# What a tool's listing keeps of a shared option's description (the instructions hold the rest).
LISTED: dict[str, str] = {}


def instructions() -> str:
    """The shared options, as one paragraph of the server's instructions."""
    return "Options the judging tools share: " + "; ".join(f"{name}: {text}" for name, text in SHARED_OPTIONS.items())
