"""One run: the engine loop over the chart, and the recorder of its commits.

The run keeps the *committed* state (replaced, never mutated, at each commit)
and writes each stage's commit to the store as one atomic batch:
``receipt*``, ``event*``, ``write*``, then the ``commit`` marker. Receipts come
first because they describe the request built from the state *before* the
stage's writes, which is what the verifier has folded when it reaches them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentfootprint.errors import (
    AgentFootprintError,
    CanonicalFormError,
    RecordTooLargeError,
    RunError,
)
from agentfootprint.logformat.echo import EchoSearch
from agentfootprint.logformat.fold import apply_write, compress_digests
from agentfootprint.logformat.log_formats import LOG_FORMAT, LogFormat
from agentfootprint.logformat.log_formats import log_format as log_format_of
from agentfootprint.logformat.request import PIECE_KINDS, RequestDigests, RequestHasher
from agentfootprint.runtime.events import LEAK_BLOCKED, AgentEvent
from agentfootprint.runtime.leak_guard import LeakGuard
from agentfootprint.runtime.observers import Delivery
from agentfootprint.runtime.ports import (
    DecisionPort,
    LiveDecisions,
    LiveModel,
    LiveTools,
    ModelPort,
    PortName,
    Ports,
    ToolPort,
    require_port,
)
from agentfootprint.runtime.reads import StageReads
from agentfootprint.runtime.scope import CommitValues, Scope, Write, json_equal, to_json_value
from agentfootprint.seal.facts import SEAL_ROW, final_answer_digest, seal_body, wire_list_digest
from agentfootprint.seal.signer import Signer
from agentfootprint.seal.statement import SealFacts, seal_run
from agentfootprint.store.redaction import Boundary, refuse_reserved_key
from agentfootprint.store.vault_base import Vault
from agentfootprint.store.writer import Clock, RunWriter

if TYPE_CHECKING:
    from agentfootprint.runtime.config import AgentConfig
    from agentfootprint.runtime.seam import Seam

__all__ = ["DeclaredPorts", "Lineage", "ReplayInput", "RunState", "StageContext"]


@dataclass(kw_only=True, slots=True)
class Lineage:
    """What a run inherits from its parent: final state, head, and receipt lists."""

    run_id: str
    conversation_id: str
    events: int
    head: bytes
    state: dict[str, Any]
    receipt_lists: dict[str, Sequence[str]]
    outcome: str
    hasher: RequestHasher | None = None
    #: the parent's final state as recorded (commitments in place of redacted values);
    #: None when nothing was redacted (then it is ``state``)
    committed: dict[str, Any] | None = None
    #: the committed form of live objects (the boundary's memo), and the parent's policy
    memo: dict[int, tuple[Any, Any]] | None = None
    #: the literals of the parent's values the child is served open (echo redaction)
    echoes: EchoSearch | None = None
    policy: Any = None
    #: the projection version the parent was recorded under (its hasher's)
    projection: int = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class ReplayInput:
    """A replayed run's input as the original recorded it: the ``user_message`` and the
    history's user ``content`` (under a policy, two different commitments of one text)."""

    user_message: Any
    content: Any


class DeclaredPorts:
    """The run's ports, each handed only to a feature that declared it (another raises
    :class:`~agentfootprint.runtime.ports.UndeclaredPortError` at its use): one check for a
    stage's context and a hook's."""

    __slots__ = ()

    def _port_holder(self) -> tuple[str, frozenset[str], RunState]:
        """The feature using the ports, the ports it declared, and the run holding them."""
        raise NotImplementedError

    def _port(self, port: PortName) -> RunState:
        feature, declared, run = self._port_holder()
        require_port(feature, declared, port)
        return run

    @property
    def model(self) -> ModelPort:
        """The model port (declared ``"model"``)."""
        return self._port("model").model

    @property
    def tools(self) -> ToolPort:
        """The tools port (declared ``"tools"``)."""
        return self._port("tools").tools

    @property
    def decisions(self) -> DecisionPort:
        """The deciders' recorded answers, a replay's, or none (declared ``"decisions"``)."""
        return self._port("decisions").decisions

    @property
    def clock(self) -> Clock:
        """The run's clock (declared ``"clock"``)."""
        return self._port("clock").ports.clock

    @property
    def salts(self) -> Callable[[], bytes]:
        """The run's source of random bytes (declared ``"salts"``): redaction's salts, an
        artifact's ref (fixed by ``Ports(salts=...)`` in deterministic tests)."""
        return self._port("salts").ports.salts


@dataclass(kw_only=True, slots=True)
class StageContext(DeclaredPorts):
    """What a stage function receives."""

    run: RunState
    scope: Scope
    stage_run: str
    receipts: list[dict[str, Any]] = field(default_factory=list)
    recorded: list[dict[str, Any]] = field(default_factory=list)
    #: model calls this stage made (a stage makes at most one; the commit marks it)
    model_calls: int = 0
    #: the first receipts already in the log (written ahead of their call, format v3)
    written_ahead: int = 0
    #: the feature whose stage this is, and the ports it declared (the seam sets both
    #: before the stage runs): a port it did not declare raises at its use
    feature: str = ""
    declared: frozenset[str] = frozenset()
    #: the request this stage served the model (its JSON, built from committed state; None
    #: in a stage that serves none, and before its call)
    served: Mapping[str, Any] | None = None

    def _port_holder(self) -> tuple[str, frozenset[str], RunState]:
        return self.feature, self.declared, self.run

    # What a stage may read of its run, named as a hook's context names it: an option's
    # stage needs these and its scope, never the rest of ``run`` (the engine's own stages
    # reach ``run`` for what drives the run: the writer, the boundary, the hasher).

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def calls(self) -> int:
        """The model calls the run has made so far (``model_calls``: this stage's)."""
        return self.run.calls

    @property
    def config(self) -> AgentConfig:
        """The agent's resolved options: ``options`` by name, the loop's own as attributes."""
        return self.run.config

    @property
    def projection(self) -> int:
        """The request projection version the run serves."""
        return self.run.seam.projection

    @property
    def time_input(self) -> dict[str, Any] | None:
        """The run's own clock as its caller gave it (``zone``, ``now``), or None."""
        return self.run.time_input

    @property
    def run_memory(self) -> dict[str, Any]:
        """What stages keep for one run beside the loop, never in state, each under its own
        key (a hook's :meth:`~agentfootprint.features.base.HookContext.memory` is keyed by
        its feature's name)."""
        return self.run.memory

    def listens(self, kind: str) -> bool:
        """An event of ``kind`` would be recorded or delivered (else a stage need not build it)."""
        return kind in self.run.recorded_kinds or self.run.events.wants(kind)

    async def emit(self, event: AgentEvent) -> None:
        """Deliver to listeners; events that record a finding also go into this commit.

        Under a redaction policy both get the committed form of the payload: listeners
        are outside the runtime, like the log. The row's payload is taken before delivery
        and each listener gets a detached copy (:class:`EventBus`), so no listener can
        change the row, or anything the stage goes on to use. How and when listeners get
        it is the run's delivery tier (:mod:`agentfootprint.runtime.observers`).
        """
        boundary = self.run.boundary
        recorded = event.kind in self.run.recorded_kinds
        if not recorded and not self.run.events.wants(event.kind):
            return  # nobody listens and nothing is recorded: nothing to commit or deliver
        payload = original = event.payload()
        guard = self.run.guard
        if guard.active:  # neither the row nor a listener gets a secret of the run
            payload = guard.checked(payload, event.kind, note=recorded)
        if boundary is not None:
            pending = len(boundary.disclosures)
            payload = boundary.commit(payload, recorded=recorded)
            if not recorded:  # listener-only commitments are never opened: drop theirs only
                del boundary.disclosures[pending:]
        if recorded:
            # the row belongs to the run already: its id is not repeated in the payload (so a
            # replay records byte-identical events)
            row = {k: v for k, v in payload.items() if k != "run_id"}
            self.recorded.append({"name": event.kind, "payload": row})
        delivered = event if payload is original else type(event).from_payload(payload)
        await self.run.events.emit(delivered)

    def mint_receipt(self, digests: RequestDigests) -> None:
        """Buffer the receipt of the call this stage makes (written at its commit)."""
        run = self.run
        body: dict[str, Any] = {
            "call": run.receipts + len(self.receipts),
            "commit": run.commit_index,
            "model": digests.model,
            "params": digests.params,
            "request": digests.request,
        }
        for kind in PIECE_KINDS:
            current = digests.pieces(kind)
            body[kind] = compress_digests(run.receipt_lists[kind], current)
            run.receipt_lists[kind] = current
        self.receipts.append(body)

    def set_derived(self, key: str, source: object, build: Callable[[], Any]) -> None:
        """``scope.set(key, build())``, where the value is a function of ``source`` alone (a
        slot's pieces of the agent's configuration). Once a run has set it from this very
        ``source`` object and the committed value is still the one that set left, it is not
        built, copied and compared again: the commit would record no write either way."""
        committed = self.scope.committed.get(key, _UNSET)
        memo = self.run_memory.get(f"derived:{key}")
        if memo is not None and memo[0] is source and memo[1] is committed:
            return
        self.scope.set(key, build())
        pending = self.scope.get(key)
        unchanged = committed is not _UNSET and json_equal(committed, pending)
        self.run_memory[f"derived:{key}"] = (source, committed if unchanged else pending)

    def pause(self, pending: dict[str, Any], private: Mapping[str, str]) -> None:
        """End the run after this stage's commit, closed ``paused`` on ``pending`` (the
        question, docs/log-format.md section 5.9), which this commit writes to state;
        ``private`` (a consent URL) is handed to the caller, never recorded."""
        run = self.run
        if not run.format.may_pause:
            raise RunError(
                f"the run paused (a {pending.get('kind')} question for tool call "
                f"{pending.get('tool_call_id')}), but it records {run.format.name}, which has "
                "no pauses (a replay records in its original's log format)",
                run_id=run.run_id,
            )
        if run.paused is not None:
            raise RuntimeError("a stage paused its run twice")
        self.scope.set("pending", pending)
        run.paused = (pending, dict(private))

    async def write_ahead(self) -> None:
        """Before the call leaves the process: its receipts (a format that writes ahead, v3
        on) and everything the run committed before it are made durable."""
        run = self.run
        if run.format.writes_ahead and self.written_ahead < len(self.receipts):
            run.writer.append([("receipt", r) for r in self.receipts[self.written_ahead :]])
            self.written_ahead = len(self.receipts)
        await run.writer.aflush()


class RunState:
    """The live side of one run."""

    def __init__(
        self,
        *,
        config: AgentConfig,
        seam: Seam,
        writer: RunWriter,
        events: Delivery,
        conversation_id: str,
        lineage: Lineage | None,
        message: Any,
        boundary: Boundary | None = None,
        vault: Vault | None = None,
        ports: Ports | None = None,
        log_format: str = LOG_FORMAT,
        signer: Signer | None = None,
        policy_digest: str | None = None,
    ) -> None:
        self.config = config
        self.seam = seam
        self.input_message = message
        ports = ports if ports is not None else config.ports
        self.ports = ports
        #: the model and tools ports: live (the agent's provider and tools) unless plugged in
        self.model: ModelPort = (
            ports.model if ports.model is not None else LiveModel(config.provider)
        )
        self.tools: ToolPort = ports.tools if ports.tools is not None else LiveTools()
        #: the deciders' recorded answers (a replay) or none (ask them)
        self.decisions: DecisionPort = (
            ports.decisions if ports.decisions is not None else LiveDecisions()
        )
        #: what the run-closed observers are told served the run
        self.provider = getattr(self.model, "provider", config.provider)
        self.recorded_kinds = seam.recorded_kinds
        #: the log format written (a replay writes its original's), by name and by its rules
        self.log_format = log_format
        self.format: LogFormat = log_format_of(log_format)
        self.chart = seam.chart
        self.writer = writer
        #: how listeners get the run's events (inline or deferred)
        self.events = events
        self.run_id = writer.run_id
        self.conversation_id = conversation_id
        self.lineage = lineage
        self.boundary = boundary
        self.vault = vault
        self.state: dict[str, Any] = dict(lineage.state) if lineage else {}
        if boundary is None:
            self.committed = self.state  # nothing is redacted: one state serves both
        else:
            base = lineage.committed if lineage and lineage.committed is not None else self.state
            self.committed = dict(base)
        self.receipt_lists: dict[str, Sequence[str]] = (
            dict(lineage.receipt_lists)  # mint_receipt replaces a list, never mutates one
            if lineage
            else {kind: [] for kind in PIECE_KINDS}
        )
        same = lineage is not None and lineage.hasher and lineage.projection == seam.projection
        #: the secrets this run keeps out of everything it records (a credential it vended)
        self.guard = LeakGuard()
        self.hasher = (
            lineage.hasher.fork()
            if same and lineage is not None and lineage.hasher is not None
            else RequestHasher(version=seam.projection)
        )
        self.commit_index = 0
        self.calls = 0
        self.receipts = 0  # receipts written (a commit that failed to write has none)
        self.stage_counts: dict[str, int] = {}
        #: what features keep for one run beside the loop, never in state (by feature name)
        self.memory: dict[str, Any] = {}
        #: what each stage read, kept beside the run (``read_tracking``; never in the log)
        tracking = config.options.get("read_tracking", "off")
        self.stage_reads = None if tracking == "off" else StageReads(tracking)
        #: the scopes track reads: for ``stage_reads``, or for each write's ``reads`` (v6)
        self.tracks_reads = self.format.records_reads or self.stage_reads is not None
        #: the ``run_end`` hooks ran (once per run)
        self.ended = False
        #: the question the run paused on, as written to state, and what only the caller
        #: gets (a consent URL); None: the run did not pause
        self.paused: tuple[dict[str, Any], dict[str, str]] | None = None
        #: a resume's answer (the ``resume`` stage commits it); None: not a resume
        self.resume_answer: dict[str, Any] | None = None
        #: the run's own clock, given by its caller (``run(..., time={"zone", "now"})``):
        #: an input of the run, which the ``time`` feature records; None: not given
        self.time_input: dict[str, Any] | None = None
        #: what seals the run at its close (log format v4), and the policy digest it attests
        self.signer = signer
        self.policy_digest = policy_digest

    @property
    def mode(self) -> CommitValues:
        return self.config.commit_values

    async def execute(self, entry: str | None = None) -> None:
        """Walk the chart from its entry (or ``entry``: a resume's) until a stage breaks or
        pauses the run; each stage commits."""
        name: str | None = self.chart.entry if entry is None else entry
        budget = self.seam.stage_budget
        try:
            while name is not None:
                budget -= 1
                if budget < 0:
                    raise RunError(
                        "the chart ran more stages than the iteration budget allows",
                        run_id=self.run_id,
                    )
                stage = self.chart.stages[name]
                count = self.stage_counts[name] = self.stage_counts.get(name, 0) + 1
                ctx = StageContext(
                    run=self,
                    scope=Scope(self.state, self.guard, track_reads=self.tracks_reads),
                    stage_run=f"{name}#{count}",
                )
                error: BaseException | None = None
                result: str | None = None
                try:
                    result = await stage.fn(ctx)
                except BaseException as exc:  # recorded, then re-raised below
                    error = exc
                ends = stage.kind == "linear" and stage.next is None
                if error is not None or ends or self.paused is not None:
                    # the run ends here: its end hooks record into this stage's commit
                    error = await self._end(ctx, error)
                self._commit(stage.name, stage.kind, ctx, result if error is None else None, error)
                if error is not None:
                    raise error
                if self.paused is not None:
                    return  # closed paused: the answer continues it in a run of its own
                if self.events.deferred:  # a slice for listeners (inline delivered already)
                    await self.events.checkpoint()
                name = self.chart.follow(stage, result)
        except BaseException as exc:
            if not self.ended:  # it ended outside a stage (the stage budget, a bad decision)
                await self._end_outside(exc)
            raise

    async def _end(self, ctx: StageContext, error: BaseException | None) -> BaseException | None:
        """Run the ``run_end`` hooks once (before the commit of ``ctx``'s stage); the error
        the run ends with (the first one: a hook's own failure only when there was none)."""
        self.ended = True
        for hook in self.seam.run_end_hooks:
            try:
                await hook(ctx, error)
            except BaseException as exc:
                if error is None:
                    error = exc
        return error

    async def _end_outside(self, error: BaseException) -> None:
        """The end hooks of a run that failed between stages: what they record is committed
        as a ``run-end`` commit of its own (only when they record anything)."""
        scope = Scope(self.state, self.guard, track_reads=self.tracks_reads)
        ctx = StageContext(run=self, scope=scope, stage_run="run-end#1")
        await self._end(ctx, error)
        if ctx.recorded:
            with contextlib.suppress(Exception):  # the run's own error is what surfaces
                self._commit("run-end", "linear", ctx, None, error)

    def _commit(
        self,
        stage: str,
        kind: str,
        ctx: StageContext,
        decision: str | None,
        error: BaseException | None,
    ) -> None:
        if error is not None and self.writer.broken is not None:
            return  # the store failed this run: nothing more is written, its error surfaces
        writes = ctx.scope.net_writes(self.mode)
        if self.format.records_reads:  # log format v6: each write with its stage's reads
            writes = ctx.scope.with_reads(writes)
        marker: dict[str, Any] = {
            "commit": self.commit_index,
            "stage": stage,
            "stage_run": ctx.stage_run,
            "writes": len(writes),
        }
        if kind == "decider" and decision is not None:
            marker["decision"] = decision
        if ctx.model_calls and not ctx.receipts and self.format.marks_calls:
            # the explicit marker of a model call when no receipt names this commit
            marker["call"] = self.calls - ctx.model_calls
        try:
            stored = [self._committed_write(w) for w in writes]
            if error is not None:  # committed after the writes, in the order the log has them
                marker["error"] = self.recorded_form({"error": error_record(error)})["error"]
        except BaseException as exc:
            if self.boundary is not None:  # nothing of this commit is written: nor kept
                self.boundary.take_disclosures()
            if ctx.written_ahead and isinstance(exc, Exception):
                self._commit_failed(stage, ctx, marker, exc)
            raise
        batch: list[tuple[str, Any]] = [("receipt", r) for r in ctx.receipts[ctx.written_ahead :]]
        batch += [("event", e) for e in ctx.recorded]
        if self.guard.hits and LEAK_BLOCKED in self.recorded_kinds:
            batch += [
                ("event", {"name": LEAK_BLOCKED, "payload": {"where": where}})
                for where in dict.fromkeys(self.guard.take_hits())
            ]
        batch += [("write", w.body(self.commit_index)) for w in stored]
        batch.append(("commit", marker))
        self._keep_disclosures()
        try:
            self.writer.append(batch)
        except (RecordTooLargeError, CanonicalFormError) as exc:
            if ctx.written_ahead:  # its receipts are in the log: the commit must close them
                self._commit_failed(stage, ctx, marker, exc)
            raise
        before, recorded_before = self.state, self.committed
        self.state = ctx.scope.apply_to(writes)
        if self.boundary is None:
            self.committed = self.state
        else:
            committed = dict(self.committed)
            for write in stored:
                apply_write(committed, write.path, write.verb, write.value, shared=True)
            self.committed = committed
        if self.stage_reads is not None:
            self.stage_reads.add(
                ctx.stage_run,
                ctx.scope,
                writes,
                before,
                recorded_before,
                self.committed,
                self.boundary is not None,
            )
        self.commit_index += 1
        self.receipts += len(ctx.receipts)

    def _commit_failed(
        self, stage: str, ctx: StageContext, marker: dict[str, Any], error: BaseException
    ) -> None:
        """A commit whose batch cannot be recorded after its receipts were written ahead:
        its marker, with no writes and the error, closes the batch they opened."""
        failed = {k: v for k, v in marker.items() if k not in ("writes", "error")}
        failed["writes"] = 0
        with contextlib.suppress(Exception):  # the commit's own error is what surfaces
            failed["error"] = self.recorded_form({"error": error_record(error)})["error"]
            self._keep_disclosures()
            self.writer.append([("commit", failed)])
            self.commit_index += 1
            self.receipts += len(ctx.receipts)

    async def flush(self) -> None:
        """Make everything the run committed durable (one transaction; awaited where the
        store is a network database)."""
        await self.writer.aflush()

    def _committed_write(self, write: Write) -> Write:
        if self.boundary is None or write.verb == "delete":
            return write
        if write.verb == "set":
            # a value recorded again (full mode) comes back as the same committed objects
            # (the boundary's memo), so a recorded list shares either all of its leading
            # objects with an earlier one or none: the receipt hasher relies on that
            value = self.boundary.commit_entry(write.path, write.value)
        else:  # append / merge: the operand's items or members, never the key itself
            value = self.boundary.commit(write.value, key=write.path)
        return (
            write
            if value is write.value
            else Write(path=write.path, verb=write.verb, value=value, reads=write.reads)
        )

    def recorded_form(self, value: Any) -> Any:
        """``value`` as the log may hold it (its secrets withheld, committed under the
        policy): an error record, what a close adds."""
        value = self.guard.checked(value, "error") if self.guard.active else value
        return value if self.boundary is None else self.boundary.commit(value)

    def _keep_disclosures(self) -> None:
        """Disclosures go to the vault before the log that references them (or are dropped)."""
        if self.boundary is None:
            return
        disclosures = self.boundary.take_disclosures()
        if disclosures and self.vault is not None:
            self.vault.put(self.run_id, disclosures)

    async def close(self, outcome: str, extra: Mapping[str, Any]) -> None:
        await self.write_close(self.close_body(outcome, extra))

    def close_body(self, outcome: str, extra: Mapping[str, Any]) -> dict[str, Any]:
        """The ``run.close`` body as it will be recorded (committed under the policy)."""
        return {
            "outcome": outcome,
            "commits": self.commit_index,
            "receipts": self.receipts,
            "calls": self.calls,
            **self.recorded_form(dict(extra)),
        }

    async def write_close(self, body: dict[str, Any]) -> None:
        """Write ``run.close`` (and, with a signer, the ``run.seal`` after it) and flush: the
        close and its seal reach the store in one transaction. A seal that cannot be made
        takes the close back: the run stays open (UNSEALED) rather than close unsealed."""
        self._keep_disclosures()
        closed = self.writer.append([("run.close", body)])
        if self.signer is not None:
            try:
                envelope = seal_run(self.seal_facts(body), self.signer)
            except BaseException as exc:
                self.writer.retract(closed)
                await self.writer.aflush()  # what the run committed before its close stays
                if isinstance(exc, Exception) and not isinstance(exc, AgentFootprintError):
                    raise RunError(
                        f"run {self.run_id} could not be sealed ({type(exc).__name__}: {exc}): "
                        "it was left open (UNSEALED), without its close",
                        run_id=self.run_id,
                    ) from exc
                raise
            self.writer.append([(SEAL_ROW, seal_body(envelope))])
        await self.writer.aflush()

    def seal_facts(self, close: Mapping[str, Any]) -> SealFacts:
        """What the seal of this run attests, once its ``run.close`` is appended."""
        return SealFacts(
            run_id=self.run_id,
            head=self.writer.head.hex(),
            events=self.writer.seq,
            policy_digest=self.policy_digest,
            receipts=self.receipts,
            outcome=close["outcome"],
            final_answer_digest=final_answer_digest(self.committed),
            wire_list_digest=wire_list_digest(self.writer.wire_payloads),
        )


#: a key absent from the committed state (None is a value)
_UNSET: Any = object()


def error_record(error: BaseException) -> dict[str, Any]:
    """How a failure is recorded: ``{"type", "message"}``, or ``{"type", "details"}``.

    An exception carrying structured data (a single dict or list argument that is JSON)
    is recorded with that data as ``details`` and no message, so its keys go through the
    redaction policy instead of hiding inside a ``repr``. A provider failure records its
    cause's data the same way.
    """
    cause = error.__cause__ if error.__cause__ is not None else error
    details = structured_details(cause)
    if details is not None:
        return {"type": type(error).__name__, "cause": type(cause).__name__, "details": details}
    if carries_data(error):  # data that cannot be recorded as JSON: never as its repr
        return {"type": type(error).__name__, "message": UNRECORDABLE}
    return {"type": type(error).__name__, "message": recordable(str(error))}


#: What stands for structured exception data that cannot be recorded as JSON (not I-JSON, or
#: holding the reserved key ``$commit``): its repr would put values the policy redacts in clear.
UNRECORDABLE = "(structured data that cannot be recorded as JSON)"


def carries_data(error: BaseException) -> bool:
    """The exception was raised with one dict or list argument."""
    return len(error.args) == 1 and isinstance(error.args[0], dict | list)


def exception_text(error: BaseException) -> str:
    """``Type: message`` for a recorded text; structured data is never written as a repr."""
    if carries_data(error):
        return f"{type(error).__name__}: " + (
            "(structured data)" if structured_details(error) is not None else UNRECORDABLE
        )
    return f"{type(error).__name__}: {recordable(str(error))}"


def structured_details(error: BaseException) -> Any:
    """The JSON data an exception carries (one dict or list argument), or None."""
    if len(error.args) != 1 or not isinstance(error.args[0], dict | list):
        return None
    try:
        refuse_reserved_key(error.args[0], "details")
        return to_json_value(error.args[0])
    except CanonicalFormError:  # not JSON, or it uses the reserved key: fall back to text
        return None


def recordable(text: str) -> str:
    """``text`` with anything UTF-8 cannot carry (lone surrogates) backslash-escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
