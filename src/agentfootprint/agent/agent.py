"""``Agent``: options checked at construction, the chart built once, runs recorded.

Every ``run()`` is one turn recorded as one run in the store: ``run.open``, a
commit per stage execution (with its writes, receipts and recorded events) and
``run.close`` with the outcome (answered, stopped early, failed). A run that
continues another starts from the parent's final state by reference (the
parent's id, event count and chain head in ``run.open``), never by copying it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Unpack

from agentfootprint.agent.option_types import AgentOptions
from agentfootprint.agent.options import AgentConfig, resolve_options
from agentfootprint.agent.pauses import Pending, checked_answer
from agentfootprint.agent.results import RunResult, StoppedEarly
from agentfootprint.agent.stores import check_durability, open_disclosures, open_store
from agentfootprint.agent.streaming import RunStream, stream_bus
from agentfootprint.errors import (
    AgentFootprintError,
    CanonicalFormError,
    ContinuationError,
    PauseAnsweredError,
    RunError,
    RunNotFoundError,
    UsageError,
    VerificationError,
)
from agentfootprint.features.answer_layer import assessment_of
from agentfootprint.features.artifacts import presented_in
from agentfootprint.features.base import MISSING
from agentfootprint.features.group_translator import translated_group
from agentfootprint.features.recording import refuse_structure_keys
from agentfootprint.features.registry import Seam, event_kinds
from agentfootprint.features.run_clock import checked_run_time
from agentfootprint.features.structure_recorders import announce as announce_structure
from agentfootprint.features.structured_output import output_of
from agentfootprint.features.tool_dispatch import refuse_pending_members
from agentfootprint.logformat import limits
from agentfootprint.logformat.canonical import check_ijson
from agentfootprint.logformat.commitments import iter_commitments
from agentfootprint.logformat.echo import EchoSearch, literals_of
from agentfootprint.logformat.fold import continued_lists
from agentfootprint.logformat.log_format_spec import PAUSED
from agentfootprint.logformat.log_formats import (
    LOG_FORMAT,
    LOG_FORMAT_V4,
    LOG_FORMAT_V5,
    LOG_FORMAT_V6,
)
from agentfootprint.logformat.log_formats import log_format as log_format_of
from agentfootprint.logformat.request import projection as projection_of
from agentfootprint.runtime import run_observers as hooks
from agentfootprint.runtime.events import EventBus, Listener
from agentfootprint.runtime.observers import (
    DeferredDelivery,
    Delivery,
    DeliveryOptions,
    InlineDelivery,
)
from agentfootprint.runtime.ports import Ports
from agentfootprint.runtime.run import Lineage, RunState, error_record
from agentfootprint.runtime.sync_loop import loop_running, run_sync
from agentfootprint.runtime.tools import json_text_size
from agentfootprint.seal.signer import Signer, checked_signer
from agentfootprint.store.base import EventStore
from agentfootprint.store.redaction import Boundary, RedactionPolicy, refuse_reserved_key
from agentfootprint.store.vault_base import Vault
from agentfootprint.store.writer import RunWriter
from agentfootprint.verify.verifier import shared_verifier
from agentfootprint.version import __version__

__all__ = ["Agent", "Pending", "RunResult", "StoppedEarly"]

_LINEAGE_CACHE = 8
_CONTINUABLE = ("answered", "stopped_early", PAUSED)


def _request_of(lineage: Lineage) -> str:
    """The request id a paused run's question is named by (its recorded ``pending``)."""
    pending = lineage.state.get("pending")
    request = pending.get("request_id") if isinstance(pending, dict) else None
    if not isinstance(request, str):
        raise ContinuationError(
            f"run {lineage.run_id} paused, but its final state holds no readable pending "
            "question (its request id is redacted or missing)",
            run_id=lineage.run_id,
        )
    return request


def _check_size(message: str) -> None:
    """A user message too large to record (it is one write body, twice) is refused before
    anything is written; the size limit is read when asked, from ``verify.limits``."""
    room = limits.MAX_BODY_BYTES - limits.MAX_ENVELOPE_BYTES
    if 6 * len(message) + 2 <= room:  # no encoding needed: a character is <= 6 bytes
        return
    size = json_text_size(message)
    if size > room:
        raise UsageError(
            f"run() argument 'message' is too large to record: {size} bytes as JSON text, "
            f"over the {room} bytes a message may take in the log (MAX_BODY_BYTES less "
            "MAX_ENVELOPE_BYTES, agentfootprint.logformat.limits); send less, or a reference",
            option="message",
        )


#: the options checked first, in this order, each with the value it is checked as when left
#: out (MISSING: not passed at all, so that its check refuses it as missing)
_FIRST: tuple[tuple[str, Any], ...] = (
    ("provider", MISSING),
    ("model", MISSING),
    ("system", ""),
    ("tools", ()),
    ("disclosures", None),
    ("ports", None),
)


def _in_check_order(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options as the features check them: those of :data:`_FIRST`, then the others in
    the caller's order; ``store`` is left out (the agent opens it: it names a resource)."""
    given = {name: options.get(name, default) for name, default in _FIRST}
    given = {name: value for name, value in given.items() if value is not MISSING}
    given.update((k, v) for k, v in options.items() if k not in given and k != "store")
    return given


class Agent:
    """A ReAct agent whose every run is recorded, receipted and verifiable."""

    def __init__(
        self,
        *,
        durability: str | None = None,
        signer: Signer | None = None,
        **options: Unpack[AgentOptions],
    ) -> None:
        """``options``: every option a feature declares, typed by :class:`AgentOptions` and
        checked by its feature (a bad one is refused with a :class:`UsageError` naming it).
        ``durability`` (of a store the agent opens from a path) and ``signer`` (seals every
        run at its close) are the agent's own."""
        given: Mapping[str, Any] = options
        store = given.get("store")
        disclosures = given.get("disclosures")
        durability = check_durability(durability, store)
        #: seals every run at its close (log format v4); None: runs are recorded unsealed (v3)
        self.signer: Signer | None = checked_signer(signer) if signer is not None else None
        self.config: AgentConfig = resolve_options(_in_check_order(given))
        #: the features taking part, and the chart, budget and projection they make
        self.seam = Seam.build(self.config.options)
        if self.seam.may_pause and self.config.redact is not None:
            refuse_pending_members(self.config.redact)
        # build-time recorders hear the chart before any file is opened: one that raises
        # refuses the agent and leaves nothing behind
        announce_structure(self.seam.chart, self.config.options)
        self._described = self._provider_info()  # checked once, recorded in every run.open
        self.vault: Vault | None = open_disclosures(disclosures, store)
        try:
            self.store: EventStore = open_store(store, durability)
        except BaseException:
            if self.vault is not None and not isinstance(disclosures, Vault):
                self.vault.close()
            raise
        self._owns_store = not isinstance(store, EventStore)
        self._owns_vault = not isinstance(disclosures, Vault)
        self.chart = self.seam.chart
        self._bus = EventBus(event_kinds())
        #: the deferred deliveries of runs under way (``drain_observers`` waits for them)
        self._deliveries: set[DeferredDelivery] = set()
        self._lineages: OrderedDict[str, Lineage] = OrderedDict()

    def close(self) -> None:
        """Close the store if this agent opened it (a path or the default memory store)."""
        if self._owns_store:
            self.store.close()
        if self._owns_vault and self.vault is not None:
            self.vault.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- events -------------------------------------------------------------------------
    def on(self, name: str, listener: Listener) -> Callable[[], None]:
        """Subscribe to typed events by kind or wildcard; returns an unsubscribe function."""
        return self._bus.on(name, listener)

    def ui_group(self) -> object:
        """The agent as its ``group_translator`` renders it (``GroupMetadata``: kind, id,
        name, no members, the chart's stages and the tool names), translated on the first
        call and kept; None without a translator. Nothing is recorded."""
        return self._ui_group

    @functools.cached_property
    def _ui_group(self) -> object:
        return translated_group(self.config, self.chart)

    async def drain_observers(self, timeout: float | None = None) -> bool:
        """Wait until the listeners were handed every event of this agent's runs still under
        way on this event loop (``observer_delivery="deferred"``; a run's own events are
        all delivered before its ``run()`` returns). True when drained, False when
        ``timeout`` (seconds) passed first."""
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0
        ):
            raise UsageError(
                f"drain_observers() argument 'timeout' must be seconds (>= 0) or None, got "
                f"{timeout!r}",
                option="timeout",
            )
        waits = [d.idle() for d in list(self._deliveries)]
        if not waits:
            return True
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        except TimeoutError:
            return False
        return True

    def _delivery(self) -> Delivery:
        """A run's delivery of its events, as ``observer_delivery`` says: to the agent's
        listeners, and to the ``run_stream`` that started the run, if one did."""
        stream = stream_bus(self)
        buses = (self._bus,) if stream is None else (self._bus, stream)
        options = self.config.options
        if options.get("observer_delivery") != "deferred":
            return InlineDelivery(buses)
        queue = options.get("observer_delivery_options") or DeliveryOptions()
        delivery = DeferredDelivery(buses, queue)
        self._deliveries.add(delivery)
        return delivery

    async def _delivered(self, events: Delivery) -> None:
        """Every captured event delivered (a run's terminal boundary)."""
        try:
            await events.drain()
        finally:
            if isinstance(events, DeferredDelivery):
                self._deliveries.discard(events)

    # -- running ------------------------------------------------------------------------
    def run_sync(
        self,
        message: str,
        *,
        continue_from: str | RunResult | None = None,
        abandon: bool = False,
        time: Mapping[str, Any] | None = None,
        retry: bool = False,
    ) -> RunResult:
        """``run`` for code without an event loop."""
        return self._in_own_loop(
            self.run(message, continue_from=continue_from, abandon=abandon, time=time, retry=retry),
            "run_sync()",
            "agent.run()",
        )

    def resume_sync(
        self,
        run: str | RunResult,
        answer: Mapping[str, Any] | None = None,
        *,
        time: Mapping[str, Any] | None = None,
        retry: bool = False,
    ) -> RunResult:
        """``resume`` for code without an event loop."""
        return self._in_own_loop(
            self.resume(run, answer, time=time, retry=retry), "resume_sync()", "agent.resume()"
        )

    def _in_own_loop(self, work: Coroutine[Any, Any, RunResult], sync: str, call: str) -> RunResult:
        """``work`` run to its end on the thread's own loop; refused (naming ``sync`` and the
        ``call`` to await instead) inside a running event loop."""
        if not loop_running():
            return run_sync(self._closing_provider(work))
        work.close()
        raise UsageError(f"{sync} was called inside a running event loop; use await {call}")

    async def _closing_provider(self, work: Coroutine[Any, Any, RunResult]) -> RunResult:
        """``work`` on the thread's loop (:mod:`agentfootprint.runtime.sync_loop`), then close
        what the provider opened in it (an HTTP adapter's connections): an agent that is
        never closed holds no socket between ``run_sync`` calls."""
        try:
            return await work
        finally:
            close = getattr(self.config.provider, "aclose", None)
            if callable(close):
                with contextlib.suppress(Exception):  # closing connections: nothing to record
                    await close()

    async def run(
        self,
        message: str,
        *,
        continue_from: str | RunResult | None = None,
        abandon: bool = False,
        time: Mapping[str, Any] | None = None,
        retry: bool = False,
    ) -> RunResult:
        """Run one turn. ``continue_from`` (a run id or result) carries its history over; a
        run that paused is continued by :meth:`resume`, or here with ``abandon=True`` (its
        question is recorded as abandoned, and its waiting tool calls as not run; ``retry``:
        as for :meth:`resume`). ``time``: the turn's own clock, ``{"zone": IANA name,
        "now": unix ms}`` (either), recorded on its clock row (needs the agent's ``time``
        option)."""
        for name, flag in (("abandon", abandon), ("retry", retry)):
            if not isinstance(flag, bool):
                raise UsageError(f"run() argument {name!r} must be True or False, got {flag!r}")
        if retry and not abandon:
            raise UsageError(
                "run() argument 'retry' retries an abandonment of a pause (abandon=True); "
                "a resume is retried with resume(..., retry=True)",
                option="retry",
            )
        if not isinstance(message, str):
            raise UsageError(
                f"run() argument 'message' must be the user message as a str, got "
                f"{type(message).__name__}",
                option="message",
            )
        try:
            check_ijson(message, ("message",))
        except CanonicalFormError as exc:
            raise UsageError(
                f"run() argument 'message' cannot be recorded: {exc}", option="message"
            ) from exc
        refuse_reserved_key(message, "message")
        _check_size(message)
        run_time = self._run_time(time)
        lineage = self._lineage(continue_from) if continue_from is not None else None
        paused = lineage is not None and lineage.outcome == PAUSED
        if paused and not abandon:
            assert lineage is not None
            raise ContinuationError(
                f"continue_from: run {lineage.run_id} paused on request "
                f"{_request_of(lineage)}: answer it with agent.resume(run, answer), or start a "
                "new turn that abandons it with run(..., abandon=True)",
                run_id=lineage.run_id,
            )
        if abandon and not paused:
            raise UsageError(
                "run() argument 'abandon': abandon=True continues a run that paused, and "
                + (
                    "no continue_from was given"
                    if lineage is None
                    else f"run {lineage.run_id} closed as {lineage.outcome!r}"
                ),
                option="abandon",
            )
        if retry:
            assert lineage is not None
            self._check_retry(lineage)
        return await self._execute(message, lineage, run_time=run_time, retry=retry)

    def _check_retry(self, lineage: Lineage) -> None:
        """``retry=True`` says an earlier answer to the pause is gone: refused (a
        :class:`UsageError`) unless a run began answering it and never closed (read from the
        store's index, to refuse a claim that cannot hold; the store checks it again)."""
        began = [
            info
            for info in self.store.runs()
            if info.parent_run_id == lineage.run_id and not info.closed
        ]
        if not began:
            raise UsageError(
                f"retry=True: no run began answering the pause of run {lineage.run_id} "
                "without closing; answer it without retry",
                option="retry",
            )

    def _closed(self, run_id: str) -> bool:
        """Whether a run the store holds has closed (read from the index, for a message)."""
        try:
            return self.store.run_info(run_id).closed
        except AgentFootprintError:
            return True

    def _run_time(self, time: Mapping[str, Any] | None) -> dict[str, Any] | None:
        checked = checked_run_time(time)
        if checked is not None and self.config.options.get("time") is None:
            raise UsageError(
                "the argument 'time' gives the run its clock, which is recorded by the agent's "
                "time option: build the agent with time=True (or {'zone': ...})",
                option="time",
            )
        return checked

    def run_stream(
        self,
        message: str,
        *,
        continue_from: str | RunResult | None = None,
        abandon: bool = False,
        time: Mapping[str, Any] | None = None,
        retry: bool = False,
    ) -> RunStream:
        """``run``, streamed: ``async with agent.run_stream(message) as run: async for item
        in run`` yields the run's events (detached copies, as ``agent.on("*")`` gets them,
        in order) and last its :class:`RunResult` (:mod:`agentfootprint.agent.streaming`).
        The run starts on entering the block; leaving it early cancels the run."""
        return RunStream(
            self,
            event_kinds(),
            lambda: self.run(
                message, continue_from=continue_from, abandon=abandon, time=time, retry=retry
            ),
        )

    async def resume(
        self,
        run: str | RunResult,
        answer: Mapping[str, Any] | None = None,
        *,
        time: Mapping[str, Any] | None = None,
        retry: bool = False,
    ) -> RunResult:
        """Answer the question ``run`` paused on, and go on from where it stopped: a new run,
        recorded as the paused run's continuation (``run.open.resumes``), that commits the
        answer and finishes the paused batch of tool calls. Works from the log alone (in any
        process, after a crash). ``answer``: the fields asked (``pending.fields``), or None
        for a consent given. A pause is answered once. ``time``: the clock the answer came
        with (recorded on the turn's ``clock-on-resume`` row; the turn keeps its clock).
        ``retry=True``: an earlier resume of this pause began and never closed (its process
        died), and is gone: this one answers instead (``run.open.retries``). If that earlier
        resume was in fact still running, the one that closes first is the answer, and
        whole-file verification reports a pause answered twice if both close."""
        if not isinstance(retry, bool):
            raise UsageError(f"resume() argument 'retry' must be True or False, got {retry!r}")
        run_time = self._run_time(time)
        lineage = self._lineage(run, resuming=True)
        if lineage.outcome != PAUSED:
            raise ContinuationError(
                f"resume: run {lineage.run_id} did not pause (it closed as "
                f"{lineage.outcome!r}); continue it with run(message, continue_from=...)",
                run_id=lineage.run_id,
            )
        if next(iter_commitments(lineage.state["pending"]), None) is not None:
            raise ContinuationError(
                f"resume: run {lineage.run_id} paused on a question part of which is redacted "
                "and cannot be opened here: resume with the disclosure vault it was recorded "
                "with (disclosures=...)",
                run_id=lineage.run_id,
            )
        checked = checked_answer(answer, lineage.state["pending"])
        if retry:
            self._check_retry(lineage)
        return await self._execute(None, lineage, resume=checked, run_time=run_time, retry=retry)

    async def _execute(
        self,
        message: Any,
        lineage: Lineage | None,
        *,
        ports: Ports | None = None,
        open_extra: dict[str, Any] | None = None,
        replayed_policy: dict[str, Any] | None = None,
        log_format: str | None = None,
        finish: Callable[[EventStore, str, dict[str, Any]], None] | None = None,
        resume: dict[str, Any] | None = None,
        run_time: dict[str, Any] | None = None,
        retry: bool = False,
    ) -> RunResult:
        """One run. The replayer plugs in recorded ``ports``, the original's
        ``replayed_policy`` (joined with the agent's) and ``log_format``, and ``finish``,
        called with the close body before it is written (it raises to fail the run).
        ``resume``: the answer to the pause of ``lineage`` (the run enters at ``resume``)."""
        ports = ports if ports is not None else self.config.ports
        answers = lineage is not None and lineage.outcome == PAUSED
        if resume is not None and self.chart.resume is None:
            raise UsageError(
                "this agent has no feature that pauses (credentials=...), so it cannot "
                "finish a paused tool call; resume with an agent configured as the one "
                "that paused"
            )
        if log_format is None:  # the agent's own run: sealed when it has a signer
            if self.config.options.get("write_provenance") is not None:
                log_format = LOG_FORMAT_V6  # each write's reads; pauses and seals as v5
            elif self.seam.may_pause or answers:
                log_format = LOG_FORMAT_V5  # pauses, and seals when it has a signer
            else:
                log_format = LOG_FORMAT_V4 if self.signer is not None else LOG_FORMAT
        signer = self.signer if log_format_of(log_format).may_seal else None
        policy = self._policy(lineage, replayed_policy)
        boundary = (
            None
            if policy is None
            else Boundary(
                policy,
                salt=ports.salts,
                replay=ports.recorded_salts,
                echoes=lineage.echoes if lineage is not None else None,
            )
        )
        if boundary is not None and lineage is not None and lineage.memo:
            boundary.seed(lineage.memo)
        run_id = ports.run_ids()
        conversation_id = lineage.conversation_id if lineage else run_id
        # buffered: flushed before each model call and tool run, and at the close
        writer = RunWriter(self.store, run_id, clock=ports.clock, buffered=True)
        opened = self._open_body(run_id, conversation_id, lineage, policy, log_format)
        if signer is not None:
            opened["seal"] = {"key_id": signer.key_id}
        if answers:
            assert lineage is not None
            opened["resumes" if resume is not None else "abandons"] = _request_of(lineage)
            if retry:  # an earlier answer began and never closed (section 5.9)
                opened["retries"] = True
        writer.append([("run.open", {**opened, **(open_extra or {})})])
        if answers:  # the store refuses a second answer to a pause before anything runs
            assert lineage is not None
            try:
                await writer.aflush()
            except PauseAnsweredError as exc:
                raise ContinuationError(
                    f"cannot continue run {lineage.run_id}: "
                    + (
                        f"its pause was answered already, by run {exc.answered_by} (a pause "
                        "is answered once)"
                        if self._closed(exc.answered_by)
                        else f"run {exc.answered_by} began answering its pause and never "
                        "closed (still under way in another process, or its process died); "
                        "if it is gone, answer again with retry=True"
                    ),
                    run_id=lineage.run_id,
                ) from exc
        run = RunState(
            config=self.config,
            seam=self.seam,
            writer=writer,
            events=self._delivery(),
            conversation_id=conversation_id,
            lineage=lineage,
            message=message,
            boundary=boundary,
            vault=self.vault,
            ports=ports,
            log_format=log_format,
            signer=signer,
            policy_digest=policy.digest if policy else None,
        )
        run.resume_answer = resume
        run.time_input = run_time
        try:
            await run.execute(self.chart.resume if resume is not None else None)
            stopped = run.state.get("stopped_early")
            outcome = "stopped_early" if stopped else "answered"
            iterations = int(run.state.get("iteration", 0))
            if run.paused is not None:
                outcome = PAUSED  # the question, as its last commit recorded it
                close = run.close_body(outcome, {})
                close["pending"] = run.committed["pending"]
            else:
                close = run.close_body(outcome, {"iterations": iterations})
            if finish is not None:
                # a replay that made fewer calls, or would record anything else (its close
                # included), fails before it closes (it reads the replay's rows: all written)
                await run.flush()
                finish(self.store, run_id, close)
        except BaseException as exc:
            if run.boundary is not None:  # a close that is not written keeps no disclosures
                run.boundary.take_disclosures()
            await self._close_failed(run, exc)
            await self._delivered(run.events)
            if isinstance(exc, RunError) and exc.run_id is None:
                exc.run_id = run_id
            if isinstance(exc, CanonicalFormError):  # something the run made cannot be recorded
                raise RunError(f"run {run_id} failed: {exc}", run_id=run_id) from exc
            if isinstance(exc, AgentFootprintError | asyncio.CancelledError | KeyboardInterrupt):
                raise
            raise RunError(
                f"run {run_id} failed: {type(exc).__name__}: {exc}", run_id=run_id
            ) from exc
        await run.write_close(close)
        self._remember(
            Lineage(
                run_id=run_id,
                conversation_id=conversation_id,
                events=writer.seq,
                head=writer.head,
                state=run.state,
                receipt_lists=run.receipt_lists,
                outcome=outcome,
                hasher=run.hasher,
                committed=None if run.boundary is None else run.committed,
                memo=None if run.boundary is None else run.boundary.memo,
                echoes=(
                    None
                    if run.boundary is None or run.boundary.echo is None
                    else run.boundary.echo.fork()  # without the run's cache of clean texts
                ),
                policy=policy.document.to_json() if policy is not None else None,
                projection=self.seam.projection,
            )
        )
        hooks.run_closed(self.store, run_id, run.provider)
        await self._delivered(run.events)
        return RunResult(
            answer=run.state.get("final_answer", ""),
            run_id=run_id,
            conversation_id=conversation_id,
            parent_run_id=lineage.run_id if lineage else None,
            iterations=iterations,
            calls=run.calls,
            outcome=outcome,
            stopped_early=StoppedEarly.from_state(stopped) if stopped else None,
            usage=dict(run.state.get("usage", {})),
            pending=None if run.paused is None else Pending.from_record(*run.paused),
            output=output_of(self.config.options, run.state.get("final_answer")),
            observer_stats=run.events.stats(),
            stage_reads=None if run.stage_reads is None else run.stage_reads.entries,
            presented=presented_in(run.memory),
            assessment=assessment_of(run.memory, run.state),
            _final=run.state,
        )

    def _policy(
        self, lineage: Lineage | None, replayed: dict[str, Any] | None = None
    ) -> RedactionPolicy | None:
        """The run's policy: the agent's, joined with the one its parent ran under (a key
        redacted once in a conversation stays redacted when it is continued) and, for a
        replay, the one the original ran under (a replay never records what it redacted)."""
        policy = self.config.redact
        for document in (lineage.policy if lineage is not None else None, replayed):
            if document is not None:
                try:
                    other = RedactionPolicy.from_document(document)
                except UsageError as exc:
                    if document is replayed:
                        raise
                    assert lineage is not None
                    raise ContinuationError(
                        f"continue_from: run {lineage.run_id} cannot be continued: {exc}",
                        run_id=lineage.run_id,
                    ) from exc
                policy = other if policy is None else policy | other
        if policy is not None and replayed is not None:  # its rows compare with the original's
            policy = policy.at_version(RedactionPolicy.from_document(replayed).version)
        if policy is not None and policy is not self.config.redact:
            try:
                refuse_structure_keys(policy)
                if self.seam.may_pause:
                    refuse_pending_members(policy)
            except UsageError as exc:
                if lineage is None:
                    raise
                raise ContinuationError(
                    f"continue_from: run {lineage.run_id} cannot be continued: {exc}",
                    run_id=lineage.run_id,
                ) from exc
        return policy

    async def _close_failed(self, run: RunState, exc: BaseException) -> None:
        # if the store itself failed, nothing more can be written
        with contextlib.suppress(AgentFootprintError):
            await run.close("failed", {"error": error_record(exc)})
        if run.writer.broken is None or run.writer.stored:  # a run the store holds any of
            hooks.run_closed(self.store, run.run_id, run.provider)

    def _open_body(
        self,
        run_id: str,
        conversation_id: str,
        lineage: Lineage | None,
        policy: RedactionPolicy | None = None,
        log_format: str = LOG_FORMAT,
    ) -> dict[str, Any]:
        config = self.config
        parent = None
        if lineage is not None:
            parent = {
                "run_id": lineage.run_id,
                "events": lineage.events,
                "head": lineage.head.hex(),
            }
        return {
            "format": log_format,
            "run_id": run_id,
            "conversation_id": conversation_id,
            "parent": parent,
            "agent": {"id": config.id, "name": config.name},
            "model": config.model,
            "provider": str(getattr(config.provider, "name", type(config.provider).__name__)),
            **self._described,
            "options": self.seam.run_open_options(),
            "projection": projection_of(self.seam.projection).describe(),
            "policy": policy.document.to_json() if policy else None,
            "policy_digest": policy.digest if policy else None,
            "library": f"agentfootprint {__version__}",
            "canon": "RFC8785",
            "hash": "SHA-256",
            "clock": {"ts": "unix-ms"},
        }

    def _provider_info(self) -> dict[str, Any]:
        """``{"provider_info": ...}`` when the provider describes itself (an HTTP adapter: its
        name and version, the SDK's and httpx's, whose JSON encoding decides the wire bytes);
        nothing for one that does not (run.open keeps its earlier members)."""
        describe = getattr(self.config.provider, "describe", None)
        if not callable(describe):
            return {}
        info = describe()
        try:
            check_ijson(info, ("provider_info",))
        except CanonicalFormError as exc:
            raise UsageError(
                f"option 'provider': describe() must return JSON data: {exc}", option="provider"
            ) from exc
        if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
            raise UsageError(
                "option 'provider': describe() must return an object of strings "
                f"(adapter, versions), got {info!r}",
                option="provider",
            )
        return {"provider_info": info}

    # -- conversations ------------------------------------------------------------------
    def _reopen(
        self, committed: dict[str, Any], vault: Vault | None
    ) -> tuple[dict[str, Any], dict[int, tuple[Any, Any]], EchoSearch | None]:
        """Live state from recorded state: commitments the vault can open are opened.

        Returns the live state; for each container that was opened, its recorded form (so
        recording it again keeps the parent's commitments); and the literals of the values
        opened (the model is served them, so the run commits its quotations of them).
        Without a vault (or for erased entries) the commitment stays in place: the model is
        served ``{"$commit": ...}`` where the value was.
        """
        memo: dict[int, tuple[Any, Any]] = {}
        if vault is None:
            return committed, memo, None
        opened: list[Any] = []
        state = {key: vault.reveal(value, memo, opened) for key, value in committed.items()}
        literals = (literal for value in opened for literal in literals_of(value))
        return state, memo, EchoSearch(literals)

    def _remember(self, lineage: Lineage) -> None:
        self._lineages[lineage.run_id] = lineage
        while len(self._lineages) > _LINEAGE_CACHE:
            self._lineages.popitem(last=False)

    def _lineage(
        self, parent: str | RunResult, vault: Vault | None = None, *, resuming: bool = False
    ) -> Lineage:
        """What continuing ``parent`` starts from; ``vault`` opens its state instead of the
        agent's own (a replay reading the original's vault: such a lineage is not kept).
        ``resuming``: the argument is ``resume``'s (named so in errors)."""
        option = "resume" if resuming else "continue_from"
        parent_id = parent.run_id if isinstance(parent, RunResult) else parent
        if not isinstance(parent_id, str) or not parent_id:
            raise UsageError(
                f"{option} takes a run id or a RunResult, got {parent!r}", option=option
            )
        own = vault is None or vault is self.vault
        cached = self._lineages.get(parent_id) if own else None
        if cached is not None:
            return cached
        verifier = shared_verifier(self.store)
        try:
            verified = verifier.verify(parent_id)
        except RunNotFoundError as exc:
            raise ContinuationError(
                f"{option}: cannot continue run {parent_id}: it is not in this agent's store"
            ) from exc
        except VerificationError as exc:
            raise ContinuationError(
                f"{option}: cannot continue run {parent_id}: its log does not verify ({exc})"
            ) from exc
        outcome = verified.close.get("outcome") if verified.close else None
        if outcome not in _CONTINUABLE:
            raise ContinuationError(
                f"{option}: cannot continue run {parent_id}: it "
                + ("never closed" if outcome is None else f"closed as {outcome!r}")
                + "; continue from a run that answered, stopped early or paused"
            )
        committed = dict(verified.final_state)
        state, memo, echoes = self._reopen(committed, self.vault if own else vault)
        # everything the child links to comes from the verified parent (its run.open and
        # events), never from the store's run index, which is not evidence
        return Lineage(
            run_id=parent_id,
            conversation_id=verified.conversation_id,
            events=verified.events,
            head=verified.head,
            state=state,
            committed=committed,
            memo=memo,
            echoes=echoes,
            policy=verified.policy,
            receipt_lists=continued_lists(verified.receipt_lists),
            outcome=str(outcome),
            hasher=verifier.hasher_after(parent_id),
            projection=verified.projection,
        )
