"""How a replay finds and shows a difference: piece comparison, diffs, masking.

``compare`` checks a replayed request against the original's receipt piece by piece;
``piece_diff`` renders two recorded values as a unified diff of indented JSON; ``masked``
hides what a redaction policy covers before anything is shown (a replay's messages and logs
never carry a value the vault opened).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson

from agentfootprint.audit.read import Receipt
from agentfootprint.errors import ReplayDivergence
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.commitments import (
    COMMIT_KEY,
    OPAQUE,
    is_commitment,
    parse_json_container,
    read_json_text,
)
from agentfootprint.logformat.request import PIECE_KINDS, RequestDigests
from agentfootprint.logformat.shared_lists import as_list
from agentfootprint.verify.verifier import Row

__all__ = [
    "REDACTED",
    "VAULT_HINT",
    "commitments_alike",
    "compare",
    "describe_row",
    "masked",
    "piece_diff",
]


VAULT_HINT = (
    "replay with the disclosure vault the original was recorded with "
    "(replay(..., disclosures=VAULT) or --disclosures VAULT)"
)


_PENDING: Any = object()


class _Frame:
    """A container (or a string holding JSON text) a walk below is in, and what it builds."""

    __slots__ = ("built", "children", "key", "same", "value")

    def __init__(self, value: Any, built: Any, children: Iterator[tuple[Any, Any]]) -> None:
        self.value = value
        self.built = built  # the dict or list being built; for a string, what its text became
        self.children = children
        self.key: Any = None
        self.same = True  # whether what was built so far equals the value (==)

    def take(self, result: Any, same: bool = True) -> None:
        kind = type(self.value)
        if kind is dict:
            self.built[self.key] = result
        elif kind is list:
            self.built.append(result)
        else:
            self.built = result
        self.same = self.same and same


def commitments_alike(value: Any) -> Any:
    """``value`` with every commitment replaced by one placeholder (JSON text included).

    Walked with a stack, however deep the value."""
    stack: list[_Frame] = []
    result = _alike_step(value, stack)
    while stack:
        frame = stack[-1]
        if result is not _PENDING:  # what the frame's current child became
            frame.take(result)
        item = next(frame.children, None)
        if item is None:
            stack.pop()
            result = frame.built
            continue
        frame.key, child = item
        result = _alike_step(child, stack)
    return result


def _alike_step(value: Any, stack: list[_Frame]) -> Any:
    """What :func:`commitments_alike` makes of ``value``, or ``_PENDING`` with its frame
    pushed (a container)."""
    while True:
        kind = type(value)
        if kind is dict:
            if is_commitment(value):
                return {COMMIT_KEY: "*"}
            stack.append(_Frame(value, {}, iter(value.items())))
            return _PENDING
        if kind is list:
            stack.append(_Frame(value, [], enumerate(value)))
            return _PENDING
        if kind is str and COMMIT_KEY in value:
            inner = parse_json_container(value)
            if inner is not None:
                value = inner  # the text is replaced by what its value becomes
                continue
        return value


REDACTED = "<redacted>"


def masked(value: Any, redacts: Callable[[str], bool]) -> Any:
    """``value`` with what sits under a redacted key replaced by ``<redacted>`` (walkable JSON
    text inside strings included, opaque JSON text replaced whole; commitments are shown as
    they are).

    Walked with a stack, however deep the value; ``redacts`` is asked about each member
    name in order, depth first. JSON text nothing was masked in is kept as written."""
    stack: list[_Frame] = []
    result, same = _mask_step(value, stack)
    while stack:
        frame = stack[-1]
        if result is not _PENDING:  # what the frame's current child became
            frame.take(result, same)
        item = next(frame.children, None)
        if item is None:
            stack.pop()
            result, same = _masked_frame(frame)
            continue
        frame.key, child = item
        if type(frame.value) is dict and redacts(frame.key) and not is_commitment(child):
            result, same = REDACTED, child == REDACTED
        else:
            result, same = _mask_step(child, stack)
    return result


def _mask_step(value: Any, stack: list[_Frame]) -> tuple[Any, bool]:
    """What :func:`masked` makes of ``value`` and whether that equals it (``==``), or
    ``_PENDING`` with its frame pushed (a container, or a string holding walkable JSON
    text)."""
    kind = type(value)
    if kind is dict:
        if is_commitment(value):
            return value, True
        stack.append(_Frame(value, {}, iter(value.items())))
        return _PENDING, False
    if kind is list:
        stack.append(_Frame(value, [], enumerate(value)))
        return _PENDING, False
    if kind is str:
        inner = read_json_text(value)
        if inner is OPAQUE:  # under a policy the boundary commits such text whole
            return REDACTED, value == REDACTED
        if inner is not None:
            stack.append(_Frame(value, None, iter(((None, inner),))))
            return _PENDING, False
    return value, True


def _masked_frame(frame: _Frame) -> tuple[Any, bool]:
    """What a finished frame of :func:`masked` gives its parent, and whether it equals the
    frame's value: a new container equals it when each member does."""
    if type(frame.value) is not str:
        return frame.built, frame.same
    if frame.same:  # the JSON text's value came through unchanged
        return frame.value, True
    text = canon(frame.built).decode("utf-8")
    return text, text == frame.value


def _pretty(value: Any) -> list[str]:
    text = orjson.dumps(
        value, default=as_list, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    ).decode()
    return (text + "\n").splitlines(keepends=True)


def piece_diff(before: Any, after: Any, label: str) -> str:
    """A unified diff of two recorded values, as readable JSON."""
    return "".join(
        difflib.unified_diff(
            _pretty(before), _pretty(after), fromfile=f"original {label}", tofile=f"replay {label}"
        )
    )


def _label(piece: Any) -> str:
    """A served piece in a few words: a message's role and the start of its text, a tool's
    or system piece's name or text (commitments show as ``<redacted>``)."""
    if not isinstance(piece, dict):
        return "?"
    head = piece.get("role") or piece.get("name") or ""
    text = piece.get("content", piece.get("text", piece.get("description")))
    if is_commitment(text):
        shown = REDACTED
    elif isinstance(text, str):
        shown = repr(text if len(text) <= 32 else text[:29] + "...")
    else:
        shown = (
            f"({len(piece.get('tool_calls') or ())} tool calls)" if piece.get("tool_calls") else ""
        )
    return f"{head} {shown}".strip()


def _positions(indices: list[int], pieces: Any) -> str:
    """``indices`` (increasing) as ranges, each with its first piece's label."""
    runs: list[list[int]] = []
    for index in indices:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    shown = []
    for run in runs[:4]:
        where = str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"
        label = _label(pieces[run[0]]) if run[0] < len(pieces) else "?"
        shown.append(f"{where} ({label}{', ...' if len(run) > 1 else ''})")
    more = f" and {len(runs) - 4} more ranges" if len(runs) > 4 else ""
    return ", ".join(shown) + more


def _membership(kind: str, want: Sequence[str], got: Sequence[str], before: Any, after: Any) -> str:
    """Which served pieces only one side has, by digest (a window that kept other messages
    names them: the original's served positions and the replay's)."""
    mine, theirs = set(got), set(want)
    only_original = [i for i, digest in enumerate(want) if digest not in mine]
    only_replay = [i for i, digest in enumerate(got) if digest not in theirs]
    parts = []
    if only_original:
        parts.append(
            f"the original served {len(only_original)} {kind} the replay does not, at "
            + _positions(only_original, before)
        )
    if only_replay:
        parts.append(
            f"the replay serves {len(only_replay)} {kind} the original did not, at "
            + _positions(only_replay, after)
        )
    return "; " + "; ".join(parts) if parts else ""


def compare(
    call: int,
    original: tuple[dict[str, Any], Receipt | None],
    digests: RequestDigests,
    request: dict[str, Any],
    run_id: str,
    explain: Callable[[Any, Any], str] | None = None,
) -> ReplayDivergence | None:
    """The first difference between a call's recorded receipt and the replayed request.

    ``explain(before, after)`` says more when two pieces differ only in commitments."""
    served, receipt = original
    if receipt is None:  # the original kept no receipts: compare the recorded requests
        if canon(served) == canon(request):  # as JSON: True is not 1
            return None
        return ReplayDivergence(
            f"call {call}: the request differs from the original's",
            call=call,
            kind="request",
            diff=piece_diff(served, request, f"call {call}"),
            original_run=run_id,
        )
    if receipt.request == digests.request:  # the whole request's digest: nothing differs
        return None
    for field in ("model", "params"):
        if canon(getattr(receipt, field)) != canon(getattr(digests, field)):
            return ReplayDivergence(
                f"call {call}: {field} differs: {getattr(receipt, field)!r} was served, the "
                f"replay serves {getattr(digests, field)!r}",
                call=call,
                kind=field,
                expected=str(getattr(receipt, field)),
                actual=str(getattr(digests, field)),
                original_run=run_id,
            )
    for kind in PIECE_KINDS:
        want, got = list(getattr(receipt, kind)), digests.pieces(kind)
        if want == got:
            continue
        position = next(
            (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
            min(len(want), len(got)),
        )
        before = served[kind][position] if position < len(served[kind]) else None
        after = request[kind][position] if position < len(request[kind]) else None
        what = "added" if before is None else "removed" if after is None else "changed"
        hint = ""
        if (
            before is not None
            and after is not None
            and canon(commitments_alike(before)) == canon(commitments_alike(after))
        ):
            hint = "; the pieces differ only in commitments (redacted values): " + (
                explain(before, after) if explain is not None else VAULT_HINT
            )
        return ReplayDivergence(
            f"call {call}: {kind} piece {position} {what} (original {len(want)} {kind} pieces, "
            f"replay {len(got)}){hint}{_membership(kind, want, got, served[kind], request[kind])}",
            call=call,
            kind=kind,
            position=position,
            expected=want[position] if position < len(want) else None,
            actual=got[position] if position < len(got) else None,
            diff=piece_diff(before, after, f"call {call} {kind}[{position}]"),
            original_run=run_id,
        )
    if receipt.request != digests.request:
        # model, params and every piece agree: a member hashed only into the request digest
        # differs (projection 3's prompt_cache markers), or its shape (the projection)
        markers = served.get("prompt_cache")
        replayed = request.get("prompt_cache")
        if canon(markers) != canon(replayed):
            return ReplayDivergence(
                f"call {call}: the prompt cache markers differ: {markers!r} were served, the "
                f"replay serves {replayed!r}",
                call=call,
                kind="request",
                diff=piece_diff(markers, replayed, f"call {call} prompt_cache"),
                expected=receipt.request,
                actual=digests.request,
                original_run=run_id,
            )
        return ReplayDivergence(
            f"call {call}: request digest differs (the request's shape: the original and the "
            "replay build it under different projection versions)",
            call=call,
            kind="request",
            expected=receipt.request,
            actual=digests.request,
            original_run=run_id,
        )
    return None


def describe_row(event: Row | None) -> str:
    if event is None:
        return "nothing more"
    body = parse(event.body)
    if event.type == "event" and isinstance(body, dict):
        return f"event {body.get('name')}"
    if event.type == "commit" and isinstance(body, dict):
        return f"the marker of stage {body.get('stage')}"
    if event.type == "write" and isinstance(body, dict):
        return f"the write {body.get('verb')} {body.get('path')!r}"
    return f"a {event.type}"
