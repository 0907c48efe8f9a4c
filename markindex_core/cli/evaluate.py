"""`markindex eval`: hit@k, MRR, evidence size and precision on questions with gold line ranges."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from markindex_core.cli.common import (
    Subparsers,
    add_library_args,
    console,
    emit_json,
    help_epilog,
    int_between,
    open_library,
)
from markindex_core.cli.retrieve import add_model_args
from markindex_core.config import EVAL_AGENT_CONCURRENCY, RETRIEVE_MAX_STEPS
from markindex_core.errors import InvalidArgument, UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from rich.table import Table


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "eval",
        help="measure retrieval quality on questions with gold line ranges",
        description="Run every question of one or more JSONL files through search and report "
        "hit@1, hit@5, MRR, evidence lines and precision, per language and overall. With "
        "--mode routing, rank whole documents by a plain BM25 over only what browse_documents "
        "shows (path words, title, description) and report doc-level hit@1, hit@5 and MRR. With "
        "--mode agent --model P:M, a model runs retrieve on every question (needs the llm "
        "extra) and the same measures are taken on its cited evidence, plus requests, tokens "
        "and steps per question.",
        epilog=help_epilog(
            [
                "markindex eval ~/docs --questions eval/questions.jsonl",
                "markindex eval ~/docs --questions q.jsonl --max-evidence-lines 60 --out r.json",
                "markindex eval ~/docs --questions q.jsonl --mode routing --json",
            ],
            "0 when the report was made (whatever its scores); 1 on an error (a question file "
            "that cannot be read, no usable index).",
        ),
    )
    add_library_args(p)
    p.add_argument(
        "--questions",
        action="append",
        required=True,
        metavar="FILE",
        help="JSONL question file (repeatable)",
    )
    p.add_argument(
        "--max-evidence-lines",
        type=int_between(1),
        default=None,
        metavar="N",
        help="count a hit only when its cited passage is at most N lines",
    )
    p.add_argument(
        "--mode",
        choices=("search", "bm25", "routing", "agent"),
        default="search",
        help="search (or bm25): passages found by search (default); routing: documents picked "
        "from browse metadata alone; agent: evidence a model cites with retrieve",
    )
    add_model_args(p, required=False)
    p.add_argument(
        "--concurrency",
        type=int,
        default=EVAL_AGENT_CONCURRENCY,
        metavar="N",
        help=f"agent mode: questions run at once (default {EVAL_AGENT_CONCURRENCY}); --rpm/--tpm "
        "are shared by all of them",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=RETRIEVE_MAX_STEPS,
        metavar="N",
        help=f"agent mode: model requests per question (default {RETRIEVE_MAX_STEPS})",
    )
    p.add_argument("--out", metavar="FILE", help="write the full report (every question) as JSON")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from markindex_core.evaluate import (
        evaluate,
        evaluate_routing,
        load_questions,
        stored_gold_paths,
    )

    lib = open_library(args)
    questions = load_questions(Path(q) for q in args.questions)
    if args.out:
        _check_out(Path(args.out), lib.db_path)  # said now, not after the whole evaluation
    lib.require_own_index()  # after --out is checked: it reads the index
    unknown = stored_gold_paths(lib, questions)
    if unknown:  # a renamed document, another library's questions: said, not only scored 0
        shown = ", ".join(unknown[:5]) + (
            f", … ({len(unknown)} in all)" if len(unknown) > 5 else ""
        )
        logging.getLogger("markindex.eval").warning(
            "gold documents not in the index (no result can hit them): %s", shown
        )
    if args.mode == "routing":
        report = evaluate_routing(lib, questions)
    elif args.mode == "agent":
        report = _run_agent(lib, questions, args)
    else:
        report = evaluate(lib, questions, max_evidence_lines=args.max_evidence_lines)
    if args.out:
        Path(args.out).write_text(
            json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8"
        )
    if args.json:
        emit_json(report["metrics"])
        return 0
    if args.mode == "routing":
        _print_routing(report)
        return 0
    if args.mode == "agent":
        _print_agent(report)
    from rich.text import Text

    from markindex_core.text.safe import printable

    table = _per_set_table(
        f"retrieval quality (k={report['k']}, max evidence {args.max_evidence_lines or '∞'} lines)",
        ("hit@1", "hit@5", "MRR", "lines", "prec@1", "prec hit", "p50 ms"),
    )
    for name, m in report["metrics"].items():
        table.add_row(
            Text(printable(name)),
            str(m["questions"]),
            f"{m['hit@1']:.1%}",
            f"{m['hit@5']:.1%}",
            f"{m['mrr']:.3f}",
            f"{m['median_evidence_lines']:g}",
            f"{m['precision@1']:.2f}",
            f"{m['hit_precision']:.2f}",
            f"{m['p50_ms']:.1f}",
        )
    console().print(table)
    console(stderr=True).print(
        "[dim]lines: median lines cited by the top result; prec@1: share of the top result's lines "
        "inside gold; prec hit: the same for the first hitting result[/]"
    )
    return 0


def _check_out(out: Path, db_path: Path) -> None:
    """Refuse an --out the report must not replace: a folder, the index or a file SQLite keeps
    beside it, any SQLite database, or a Markdown document (a report written over a document of
    the library, or over its index, destroys what it measures)."""
    from markindex_core.config import MARKDOWN_SUFFIXES
    from markindex_core.store.files import sqlite_header

    hint = "pass the path of a new file (or of an earlier report), e.g. --out report.json"
    if out.is_dir() or not out.parent.is_dir():
        raise InvalidArgument(
            f"--out {out} cannot be written: it is a folder, or its folder does not exist", hint
        )
    real = out.resolve()
    index = db_path.resolve()
    if real.parent == index.parent and real.name.startswith(index.name):
        raise InvalidArgument(f"--out {out} is the index file (or one kept beside it)", hint)
    if real.name.lower().endswith(MARKDOWN_SUFFIXES):
        raise InvalidArgument(f"--out {out} names a Markdown document, not a report", hint)
    if real.is_file() and sqlite_header(real):
        raise InvalidArgument(f"--out {out} is an SQLite database, not a report", hint)


def _print_routing(report: dict[str, Any]) -> None:
    from rich.text import Text

    from markindex_core.text.safe import printable

    table = _per_set_table(
        f"routing by browse metadata (k={report['k']}, {report['documents']} documents)",
        ("hit@1", "hit@5", "MRR"),
    )
    for name, m in report["metrics"].items():
        table.add_row(
            Text(printable(name)),  # a set is named by the questions' "lang": untrusted text
            str(m["questions"]),
            f"{m['hit@1']:.1%}",
            f"{m['hit@5']:.1%}",
            f"{m['mrr']:.3f}",
        )
    console().print(table)
    console(stderr=True).print(
        "[dim]each document ranked by a plain BM25 over its path words, title and description "
        "as browse_documents lists them; a hit is a gold document in the top k[/]"
    )


def _run_agent(
    lib: Any, questions: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    from markindex_core.evaluate import evaluate_agent
    from markindex_core.llm.models import require_llm_extra

    if not args.model:
        raise UsageError(
            "--mode agent needs --model P:M", "e.g. --model anthropic:claude-sonnet-4-5"
        )
    require_llm_extra()
    return evaluate_agent(
        lib,
        questions,
        model=args.model,
        concurrency=args.concurrency,
        rpm=args.rpm,
        tpm=args.tpm,
        base_url=args.base_url,
        max_steps=args.max_steps,
        max_evidence_lines=args.max_evidence_lines,
    )


def _per_set_table(title: str, columns: tuple[str, ...]) -> Table:
    """A table with one row per question set: its name, its size, then `columns` (numbers)."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("set", justify="left")
    for col in ("n", *columns):
        table.add_column(col, justify="right")
    return table


def _print_agent(report: dict[str, Any]) -> None:
    """What the agent runs cost, per set; the quality table follows."""
    from rich.text import Text

    from markindex_core.text.safe import printable

    table = _per_set_table(
        f"agent runs ({printable(report['model'])})",
        ("req/q", "in tok/q", "out tok/q", "steps/q", "tools/q", "stops", "errors"),
    )
    for name, m in report["metrics"].items():
        stops = ", ".join(f"{k} {v}" for k, v in sorted(m["stop_reasons"].items()))
        table.add_row(
            Text(printable(name)),
            str(m["questions"]),
            f"{m['requests_per_question']:.1f}",
            f"{m['input_tokens_per_question']:,.0f}",
            f"{m['output_tokens_per_question']:,.0f}",
            f"{m['steps_per_question']:.1f}",
            f"{m['tool_calls_per_question']:.1f}",
            stops,
            str(m["errors"]),
        )
    console().print(table)
