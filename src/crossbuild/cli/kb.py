"""`crossbuild kb list | show ID | search TEXT | eval | mine`: the knowledge base of cross-build failures."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from crossbuild.cli.common import console, err, open_trace, print_table

kb_app = typer.Typer(help="The knowledge base of cross-build failures attached to failed steps.",
                     no_args_is_help=True)


def _kb():
    from crossbuild import kb

    return kb.load()


@kb_app.command("list")
def kb_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every entry: id, title, and the fixes the planner can apply by itself."""
    k = _kb()
    if as_json:
        console.print_json(json.dumps([e.model_dump(exclude={"patterns"}) for e in k.entries.values()]))
        return
    table = Table(title=f"{len(k)} knowledge-base entries")
    for col in ("id", "title", "planner actions"):
        table.add_column(col, overflow="fold")
    for e in k.entries.values():
        table.add_row(e.id, escape(e.title), ", ".join(a.kind for a in e.actions) or "-")
    print_table(table)


@kb_app.command("show")
def kb_show(entry_id: str = typer.Argument(...)) -> None:
    """One entry whole: symptoms, cause, fix, actions, fixtures."""
    k = _kb()
    e = k.get(entry_id)
    if e is None:
        import difflib

        close = difflib.get_close_matches(entry_id, list(k.entries), n=3)
        err.print(f"[red]error:[/] no entry {entry_id!r}" + (f"; did you mean {', '.join(close)}?" if close else ""))
        raise typer.Exit(2)
    console.print(f"[bold]{e.id}[/]: {escape(e.title)}")
    console.print(f"cause: {escape(e.cause)}\nfix: {escape(e.fix)}")
    console.print("symptoms:\n" + "\n".join(f"  {escape(s)}" for s in e.symptoms))
    if e.actions:
        console.print("actions:\n" + "\n".join(f"  {escape(a.model_dump_json(exclude_none=True))}"
                                               for a in e.actions))
    console.print("fixtures:\n" + "\n".join("  " + escape(f.replace(chr(10), chr(10) + "  ")) for f in e.fixtures))


@kb_app.command("search")
def kb_search(text: str = typer.Argument(..., help="An error message or symptom; '-' reads standard input."),
              limit: int = typer.Option(3, "--limit", "-n")) -> None:
    """The entries a failed step with this output would get (fingerprints first, then BM25 above a threshold)."""
    import sys

    query = sys.stdin.read() if text == "-" else text
    matches = _kb().search(query, limit=limit)
    if not matches:
        console.print("no entry matches")
        return
    for m in matches:
        console.print(f"[bold]{m.entry.id}[/] ({m.how}, score {m.score:.1f}): {escape(m.entry.title)}")
        console.print(f"  fix: {escape(m.entry.fix)}")


@kb_app.command("eval")
def kb_eval(show_misses: bool = typer.Option(False, "--misses", help="List the queries ranked wrong."),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Retrieval quality on the labelled query set: Recall@1, Recall@3, MRR, false attachments, ms/query."""
    from crossbuild.kb.evaluation import evaluate

    r = evaluate(_kb())
    if as_json:
        console.print_json(json.dumps({
            "entries": r.entries, "queries": r.queries,
            "kinds": {k: {"n": s.n, "recall@1": s.recall1, "recall@3": s.recall3, "mrr": s.mrr}
                      for k, s in r.kinds.items()},
            "negatives": r.negatives, "false_attachments": r.false_attachments,
            "false_attachment_rate": r.false_attachment_rate, "ms_per_query": r.ms_per_query,
            "trust": {k: {"matches": n, "right": ok} for k, (n, ok) in r.trust.items()},
            "words_alone": {k: {"matches": n, "right": ok} for k, (n, ok) in r.words_alone.items()}}))
        return
    console.print(f"knowledge base: {r.entries} entries, {r.queries} labelled queries")
    table = Table()
    for col in ("queries", "n", "Recall@1", "Recall@3", "MRR"):
        table.add_column(col)
    for kind, s in r.kinds.items():
        table.add_row(kind, str(s.n), f"{s.recall1:.3f}", f"{s.recall3:.3f}", f"{s.mrr:.3f}")
    print_table(table)
    console.print(f"false attachments on {r.negatives} outputs that match no entry: {r.false_attachments} "
                  f"({r.false_attachment_rate:.1%}); {r.ms_per_query:.2f} ms/query")
    for name, table_of in (("as search gives them", r.trust), ("by words alone, fingerprints ignored", r.words_alone)):
        shown = "; ".join(f"{fit} {ok}/{n} ({ok / n:.0%})" for fit, (n, ok) in sorted(table_of.items()) if n)
        console.print(f"top-1 right, {name}: {shown}")
    unseen = r.kinds.get("unseen")
    if unseen:
        ok = unseen.recall1 >= 0.9 and unseen.recall3 >= 0.97 and r.false_attachment_rate <= 0.05
        console.print("goal (unseen Recall@1 >= 0.9, Recall@3 >= 0.97, false attachments <= 5%): "
                      + ("[green]met[/]" if ok else "[red]not met[/]"))
    if show_misses:
        for kind, s in r.kinds.items():
            for text, ranked in s.misses:
                console.print(f"  miss ({kind}): {escape(text)!r} -> {ranked}", highlight=False)
        for text, attached in r.false_examples:
            console.print(f"  false attachment: {escape(text)!r} -> {attached}", highlight=False)


@kb_app.command("mine")
def kb_mine(db: Path = typer.Option(None, "--db"), min_count: int = typer.Option(1, "--min-count")) -> None:
    """Failed commands in the trace that no entry matches, grouped by error fingerprint, with the run ids and the
    command that finally worked: evidence for new entries (nothing is added automatically)."""
    from crossbuild.kb.mining import mine

    groups = mine(open_trace(db), _kb(), min_count=min_count)
    if not groups:
        console.print("every failed command in the trace is matched by an entry (or there are none)")
        return
    for g in groups:
        console.print(f"[bold]{g.count}x[/] {escape(g.fingerprint)}")
        console.print(f"  runs: {', '.join(g.runs[:8])}")
        if g.fixed_by:
            console.print(f"  later worked: {escape(' | '.join(g.fixed_by[:3]))}")
        console.print("  " + escape(g.example.splitlines()[0] if g.example else ""))
