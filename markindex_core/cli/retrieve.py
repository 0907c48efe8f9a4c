"""`markindex retrieve`: a model finds the evidence with the five tools; only cited lines come back."""

from __future__ import annotations

import argparse
import sys

from markindex_core.cli.common import (
    Subparsers,
    add_library_args,
    add_model_server_args,
    emit_json,
    help_epilog,
    int_between,
    open_library,
    require_stdout,
)
from markindex_core.config import RETRIEVE_MAX_STEPS


def add_model_args(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """--model, --base-url, --rpm and --tpm: for the commands that ask a model per question."""
    p.add_argument(
        "--model",
        required=required,
        metavar="P:M",
        help="provider:model as pydantic-ai names it (anthropic:…, openai:…, openai-chat:… for "
        "any OpenAI-compatible server, ollama:…, google-gla:…); keys come from the provider's "
        "environment variables",
    )
    add_model_server_args(p)


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "retrieve",
        help="let a model find the evidence for a question (needs the llm extra)",
        description="A model navigates the library with the same five tools an MCP client has "
        "and cites line ranges; only those lines, re-read from the index, are returned (never "
        "text the model wrote), with usage and why it stopped: done, budget, max_steps or "
        "unusable_citations (nothing it cited exists in the index). "
        "Needs pip install 'markindex[llm]'. Document text is untrusted data for the model.",
        epilog=help_epilog(
            [
                'markindex retrieve ~/docs "how do I run it behind a proxy?" '
                "--model anthropic:claude-sonnet-4-5",
                'markindex retrieve ~/docs "默认端口是多少" --model openai-chat:qwen2.5 '
                "--base-url http://127.0.0.1:8000/v1 --json",
            ],
            "0 when evidence was found; 1 when the model cited none (with --json too) or on an "
            "error (no key, the model server failed).",
        ),
    )
    add_library_args(p)
    p.add_argument("question", metavar="QUESTION", help="what to find evidence for")
    add_model_args(p)
    p.add_argument(
        "--max-steps",
        type=int,
        default=RETRIEVE_MAX_STEPS,
        metavar="N",
        help=f"at most N model requests (default {RETRIEVE_MAX_STEPS})",
    )
    p.add_argument(
        "--max-input-tokens",
        type=int_between(1),
        metavar="N",
        help="stop (stop_reason budget) before a request would take the run's input tokens over N",
    )
    p.set_defaults(func=cmd_retrieve)


def cmd_retrieve(args: argparse.Namespace) -> int:
    from markindex_core.llm.models import require_llm_extra

    require_llm_extra()
    lib = open_library(args, own_index=True)
    result = lib.retrieve(
        args.question,
        model=args.model,
        max_steps=args.max_steps,
        max_input_tokens=args.max_input_tokens,
        rpm=args.rpm,
        tpm=args.tpm,
        base_url=args.base_url,
    )
    if args.json:
        emit_json(result.to_json())
        return 0 if result.evidence else 1
    from markindex_core.text.safe import printable

    require_stdout()
    out = sys.stdout
    for e in result.evidence:
        out.write(printable(f"[{e.doc_path}, L{e.start_line}-{e.end_line}]") + "\n")
        if e.title_path:
            out.write("  " + printable(" › ".join(e.title_path)) + "\n")
        for n, line in enumerate(e.text.split("\n"), e.start_line):
            out.write(f"{n:>6}│ {printable(line)}\n")
        out.write("\n")
    u = result.usage
    sys.stderr.write(
        f"{len(result.evidence)} evidence ranges; stop: {result.stop_reason}; "
        f"{u.requests} requests, {u.input_tokens} input and {u.output_tokens} output tokens, "
        f"{result.tool_calls} tool calls\n"
    )
    return 0 if result.evidence else 1
