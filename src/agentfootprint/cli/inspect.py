"""``runs``, ``show``, ``served``, ``state``, ``tool-calls``: read a log, never change it.

``show``, ``served``, ``state`` and ``tool-calls`` verify the run first: what they print is what a
verified log holds (a run that does not verify is refused with exit 1, never rendered
from rows that may be forged or malformed).
"""

from __future__ import annotations

import contextlib
from typing import Any

import click

from agentfootprint.audit.pauses import open_questions
from agentfootprint.audit.read import RunReader
from agentfootprint.audit.sources import body_object
from agentfootprint.cli._boundary import EXIT_DIFFERENT, EXIT_USAGE, fail, json_flag, one_line
from agentfootprint.cli._common import (
    DB,
    Database,
    echo_json,
    open_log,
    open_vault_argument,
    short,
    when,
)
from agentfootprint.logformat.canonical import parse
from agentfootprint.logformat.commitments import COMMIT_KEY, is_commitment, iter_commitments
from agentfootprint.seal.dsse import parse_envelope
from agentfootprint.store.vault_base import Vault
from agentfootprint.verify.verifier import shared_verifier

__all__ = ["runs", "served", "show", "state", "tool_calls_command"]


def _exit_codes(one: str) -> str:
    return (
        "\b\nExit codes:\n"
        "  0  printed\n"
        f"  1  {one}\n"
        "  2  usage error: DB missing, not a log, of a newer schema version or\n"
        "     unreadable; unknown run\n"
    )


@click.command(epilog=_exit_codes("a bundle whose framing does not verify"))
@click.argument("db", type=DB)
@click.option(
    "--pending",
    is_flag=True,
    help="Only the questions still open: runs closed paused (log format v5) that no closed "
    "run resumes or abandons yet, each with its request, kind, tool and question (and the "
    "runs that began answering and never closed: retry them once gone).",
)
def runs(db: Database, pending: bool) -> None:
    """List the runs in DB (a database or an export bundle), in the order they opened.

    DB is never changed (a database is opened read-only). Runs are found from the
    events (as `verify` finds them); one with no row in the run index is listed as such.
    Nothing is verified here: run `verify` for that.
    """
    if pending:
        _pending(db)
        return
    with open_log(db) as source:
        indexed = {info.run_id: info for info in source.runs()}
        found = source.run_ids()
        if not found:
            click.echo("no runs")
        for run_id in found:
            info = indexed.get(run_id)
            if info is None:
                click.echo(f"{one_line(run_id)}  (events but no row in the run index)")
                continue
            status = "closed" if info.closed else "open"
            sealed = info.last_type == "run.seal"  # the run.close is the row before its seal
            if info.closed:
                start = max(info.events - (2 if sealed else 1), 0)
                close = next((r for r in source.read(run_id, start=start)), None)
                outcome = body_object(close.body).get("outcome") if close is not None else None
                status = outcome if isinstance(outcome, str) else status
            parent = f" parent={one_line(info.parent_run_id)}" if info.parent_run_id else ""
            click.echo(
                f"{one_line(run_id)}  {when(info.opened_at)}  {info.events:>5} events  "
                f"{one_line(status):<13} {'sealed  ' if sealed else ''}"
                f"conversation={one_line(info.conversation_id)}{parent}"
            )


def _pending(db: Database) -> None:
    """``runs --pending``: one line per open question (docs/log-format.md section 5.9)."""
    with open_log(db) as source:
        questions = list(open_questions(source))
    if not questions:
        click.echo("no open questions")
    for question in questions:
        asked = question.pending
        fields = asked.get("fields")
        named = f"  fields={','.join(map(one_line, fields))}" if isinstance(fields, dict) else ""
        click.echo(
            f"{one_line(question.run_id)}  request={short(asked.get('request_id'))}  "
            f"kind={short(asked.get('kind'))}  tool={short(asked.get('tool'))}  "
            f"question={short(asked.get('question'), 120)}{named}  "
            f"conversation={one_line(question.conversation_id)}"
            + (
                f"  began-answering-never-closed={','.join(map(one_line, question.unclosed))}"
                if question.unclosed
                else ""
            )
        )


def _error(error: Any, full: bool) -> str:
    if not isinstance(error, dict):
        return f"  ERROR error: {short(error, None if full else 120)}"
    detail = error.get("message", error.get("details"))
    return f"  ERROR {one_line(error.get('type', 'error'))}: {short(detail, None if full else 120)}"


def _line(type_: str, body: dict[str, Any], full: bool) -> str | None:
    """The pending line a row adds under its commit (None: the row prints none)."""
    if type_ == "write":
        value = (
            "" if body["verb"] == "delete" else " " + short(body.get("value"), None if full else 72)
        )
        return f"    {body['verb']:<6} {one_line(body['path'])}{value}"
    if type_ == "receipt":
        messages = body["messages"]
        count = messages["keep"] + len(messages["add"])
        request = body["request"] if full else body["request"][:16] + "…"
        return f"    receipt call {body['call']}: request {request} ({count} messages)"
    if type_ == "event":
        payload = " " + short(body.get("payload"), None) if full else ""
        return f"    event  {one_line(body.get('name'))}{payload}"
    return None


@click.command(epilog=_exit_codes("the run does not verify (nothing of it is shown)"))
@click.argument("db", type=DB)
@click.argument("run_id")
@click.option("--full", is_flag=True, help="Print every value whole (no value is cut).")
@json_flag(
    "One JSON document: the opening, each commit with its rows, the close and the seal, "
    "every body whole."
)
def show(db: Database, run_id: str, full: bool, json_out: bool) -> None:
    """Print RUN_ID's commit timeline: each stage's writes, receipts and decisions.

    DB is a database (opened read-only, never changed) or an export bundle; redacted
    values show as their commitments. The run is verified first. Values longer than a line
    are cut unless --full; --json gives the whole timeline as data.
    """
    if full and json_out:
        fail("show: give --full or --json, not both (--json is always whole)")
    with open_log(db) as source:
        verified = shared_verifier(source).verify(run_id)
        if json_out:
            echo_json(_timeline(source, run_id, verified.outcome.value))
            return
        pending: list[str] = []
        for event in source.read(run_id):
            body = parse(event.body)
            if event.type == "run.open":
                parent = body.get("parent")
                click.echo(
                    f"run {one_line(run_id)}  opened {when(event.ts)}  "
                    f"model={one_line(body.get('model'))}"
                    + (f"  continues {one_line(parent['run_id'])}" if parent else "")
                )
            elif event.type == "commit":
                extra = f" -> {one_line(body['decision'])}" if "decision" in body else ""
                if "error" in body:
                    extra += _error(body["error"], full)
                click.echo(f"  [{body['commit']:>3}] {one_line(body['stage_run'])}{extra}")
                for line in pending:
                    click.echo(line)
                pending = []
            elif event.type == "run.close":
                click.echo(f"run closed {when(event.ts)}: {short(body, None if full else 200)}")
            elif event.type == "run.seal":
                signed = [s.keyid for s in parse_envelope(body["dsse"]).signatures]
                click.echo(f"run sealed by key {one_line(', '.join(signed))} (verify --key)")
            elif (added := _line(event.type, body, full)) is not None:
                pending.append(added)


def _timeline(source: Any, run_id: str, outcome: str) -> dict[str, Any]:
    """``show --json``: the verified run's rows as data, grouped by the commit they belong to
    (a commit's writes, receipts and events come before its marker in the log)."""
    document: dict[str, Any] = {
        "run_id": run_id,
        "verdict": outcome,
        "opened": None,
        "commits": [],
        "close": None,
        "seal": None,
    }
    rows: list[dict[str, Any]] = []
    for event in source.read(run_id):
        body = parse(event.body)
        row = {"seq": event.seq, "type": event.type, "ts": event.ts, "body": body}
        if event.type == "run.open":
            document["opened"] = row
        elif event.type == "commit":
            document["commits"].append({**row, "rows": rows})
            rows = []
        elif event.type == "run.close":
            document["close"] = row
        elif event.type == "run.seal":
            keys = [s.keyid for s in parse_envelope(body["dsse"]).signatures]
            document["seal"] = {**row, "keys": keys}
        else:
            rows.append(row)
    if rows:  # receipts written ahead of a call whose commit never came (a crash)
        document["unfinished"] = rows
    return document


@click.command(epilog=_exit_codes("the run does not verify, or (--wire) its wire digest differs"))
@click.argument("db", type=DB)
@click.argument("run_id")
@click.argument("k", type=click.IntRange(min=0))
@click.option(
    "--wire",
    is_flag=True,
    help="Rebuild the exact HTTP request body the adapter sent for call K (from the served "
    "request and the adapter's versions in run.open) and check its digest against the "
    "recorded wire exchange.",
)
@click.option(
    "--disclosures",
    "vault",
    type=DB,
    metavar="VAULT",
    help="With --wire, for a run recorded under a redaction policy: the vault that opens its "
    "commitments (read-only). The body is then not printed (it holds the redacted values); "
    "its digest is checked against the opened commitments.",
)
def served(db: Database, run_id: str, k: int, wire: bool, vault: Database | None) -> None:
    """Print the request served at call K (0-based) of RUN_ID, rebuilt from the log.

    DB is a database (opened read-only, never changed) or an export bundle. Under a
    redaction policy this is the request as recorded (commitments in place of redacted
    values): what the receipt attests. The run is verified first. With --wire: the HTTP
    body the adapter sends for it, whether its digest is the recorded one, and which
    version differs from the recording when one does (needs the adapter's extra installed).
    """
    with open_log(db) as source:
        verified = shared_verifier(source).verify(run_id)
        request = RunReader(source).served_at(run_id, k)
        if not wire:
            echo_json(request)
            return
        # the kind from the event class (imported here: the runtime is not loaded for the
        # CLI's other commands)
        from agentfootprint.runtime.events import WireExchange

        opener: Vault | None = None
        if verified.policy is not None:
            if vault is None:
                fail(
                    "--wire: the run was recorded under a redaction policy: its wire bodies "
                    "hold values the log keeps as commitments; give --disclosures VAULT (the "
                    "vault it was recorded with) to rebuild them"
                )
            opener = open_vault_argument(vault, readonly=True)
        opened: dict[str, Any] = {}
        recorded: list[Any] = []
        for event in source.read(run_id):
            body = parse(event.body)
            if event.type == "run.open":
                opened = body
            elif (
                event.type == "event"
                and body.get("name") == WireExchange.kind
                and body.get("payload", {}).get("call") == k
            ):
                recorded = [a.get("request") for a in body["payload"].get("attempts", [])]
    if opener is None:
        _check_wire(opened, request, recorded, k)
        return
    with contextlib.closing(opener):
        live = opener.reveal(request)
        if next(iter_commitments(live), None) is not None:
            fail(
                "--wire: the vault cannot open every commitment of the served request (erased "
                "or from another vault): its body cannot be rebuilt"
            )
        digests = [_opened_digest(opener, d) for d in recorded]
    _check_wire(opened, live, digests, k, show_body=False)


def _opened_digest(vault: Vault, recorded: Any) -> Any:
    """A recorded wire digest: as is, or opened from its commitment by the vault."""
    if not is_commitment(recorded):
        return recorded
    found = vault.get(recorded[COMMIT_KEY])
    if found is None or not found.opens():
        fail("--wire: the vault cannot open the recorded wire digest's commitment")
    return found.value


def _check_wire(
    opened: dict[str, Any], request: Any, recorded: list[Any], k: int, *, show_body: bool = True
) -> None:
    from agentfootprint.logformat.hashing import hexdigest
    from agentfootprint.providers import rebuilt
    from agentfootprint.runtime.provider import Request

    info = opened.get("provider_info")
    if not isinstance(info, dict):
        fail(
            "--wire: the run was not recorded through an HTTP adapter "
            "(run.open has no provider_info)"
        )
    if not recorded:
        fail(f"--wire: call {k} has no recorded wire exchange")
    adapter = rebuilt(info)
    body = adapter.wire_request(Request.from_served(request))
    digest = hexdigest("wire/request", body)
    now = adapter.describe()
    differs = {
        name: {"recorded": info.get(name), "now": now.get(name)}
        for name in sorted(set(info) | set(now))
        if info.get(name) != now.get(name)
    }
    matches = all(d == digest for d in recorded)
    echo_json(
        {
            "call": k,
            "body": parse(body) if show_body else None,
            "digest": digest,
            "recorded": recorded,
            "matches": matches,
            "versions_differ": differs,
        }
    )
    if not matches:
        fail(
            f"--wire: the rebuilt body's digest {digest} is not the recorded one"
            + (f" (versions differ: {', '.join(differs)})" if differs else ""),
            EXIT_DIFFERENT,
        )


@click.command(epilog=_exit_codes("the run does not verify"))
@click.argument("db", type=DB)
@click.argument("run_id")
@click.option(
    "--at",
    "commit",
    type=click.IntRange(min=-1),
    required=True,
    metavar="COMMIT",
    help="The commit (0-based, the [n] that `show` prints) whose state to print; "
    "-1 is the state the run started from (its parent's final state, or {}).",
)
@click.option("--path", "key", metavar="KEY", help="Print only this state key's value.")
def state(db: Database, run_id: str, commit: int, key: str | None) -> None:
    """Print RUN_ID's state as of commit COMMIT, rebuilt from the log.

    The state is folded from the run's writes (and its ancestors' for a continued run)
    and printed as JSON with sorted keys; --path KEY prints one key's value. DB is a
    database (opened read-only, never changed) or an export bundle; redacted values show
    as their commitments. The run is verified first. Exit 2 for an unknown run, commit
    or key.
    """
    with open_log(db) as source:
        shared_verifier(source).verify(run_id)
        folded: Any = RunReader(source).state_at(run_id, commit)
    if key is not None:
        if key not in folded:
            fail(
                f"no key {key!r} in the state of run {run_id} at commit {commit} "
                f"(keys: {', '.join(sorted(folded)) or 'none'})",
                EXIT_USAGE,
            )
        folded = folded[key]
    echo_json(folded, sort_keys=True)


@click.command("tool-calls", epilog=_exit_codes("the run does not verify (nothing of it is shown)"))
@click.argument("db", type=DB)
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the records as a JSON array.")
def tool_calls_command(db: Database, run_id: str, as_json: bool) -> None:
    """Print every tool call of RUN_ID, from the log alone: the model call whose reply asked
    for it, the tools offered at that call, its permission decision and its result.

    The run is verified first. DB is a database (opened read-only, never changed) or an
    export bundle; redacted values show as their commitments. Teardowns recorded for a
    call (session closed, or failed and why) are listed under it.
    """
    from agentfootprint.audit.tool_calls import tool_calls

    with open_log(db) as source:
        found = tool_calls(source, run_id)
    if as_json:
        echo_json([record.to_json() for record in found], sort_keys=True)
        return
    if not found:
        click.echo("no tool calls")
    for r in found:
        offered = ", ".join(one_line(name) for name in r.offered) or "none"
        click.echo(
            f"call {r.call} #{r.index}  {one_line(r.tool)}({short(r.arguments, 60)})  "
            f"id={one_line(r.tool_call_id)}"
        )
        click.echo(f"    offered: {offered}")
        if r.permission is not None:
            p = r.permission
            why = f": {short(p.get('reason'), 80)}" if p.get("reason") else ""
            click.echo(
                f"    permission: {one_line(p.get('decision'))} by {one_line(p.get('by'))}{why}"
            )
        if r.result is None:
            click.echo("    result: (none recorded: the run ended before the results)")
        else:
            flag = "error " if r.is_error else ""
            click.echo(f"    result: {flag}{short(r.result, 100)}")
        for t in r.teardown:
            extra = f" {one_line(t.get('error_class'))}" if t.get("error_class") else ""
            click.echo(f"    teardown: {one_line(t.get('event'))}{extra} ({short(t.get('ms'))} ms)")
