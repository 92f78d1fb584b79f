"""What the provider adapters cost: per call against a bare SDK call, per iteration recorded.

Both vendors, each against its fake server from ``agentfootprint.testing`` (a real HTTP
server on 127.0.0.1 in a thread of this process, Nagle off), started once per vendor:

* **per call**: in one event loop, a bare SDK call (``AsyncOpenAI`` / ``AsyncAnthropic``
  with its default HTTP client, ``max_retries=0``, given the very keyword arguments the
  adapter builds, so the same body bytes go out: checked) against
  ``adapter.complete(Request.from_served(served))`` for the same served request, plain and
  streaming. The four variants are interleaved call by call (the order reversed every
  other round) after a warm-up of each. The served requests are the bench conversation's
  after 12 iterations (the last call of its 3rd turn: 29 messages, one tool, ~10 KB of
  served JSON; ``--calls`` timed calls) and after 100 (249 messages, ~82 KB;
  ``--long-calls``): the adapter's translation is O(history) per call. The reply is that
  turn's final answer (~145 characters of text). Medians.
* **per iteration**: the bench conversation (``common.Conversation``, N = 50 by default:
  13 turns of ``run_sync(..., continue_from=previous)``, 63 model calls) recorded by
  ``af.Agent`` into a fresh SQLite file with ``af.MockProvider`` and with each adapter
  (plain and streaming) against its fake server, scripted with the same replies; next to
  each, the same conversation through a plain loop with no agentfootprint (for the mock,
  ``common.run_plain_conversation``; for a vendor, the bare SDK: a message list in the
  vendor's format, one ``asyncio.run`` and one client per turn as ``run_sync`` and the
  adapter have). Variants run one after another, the first rotating between repetitions;
  medians. Every run of the last repetition's files must verify.

The fake server's own time (reading the request, writing the reply, its thread sharing
the GIL with the client) is in every bare and adapter figure alike: it cancels out of the
differences, not out of the ratios.

Usage::

    python bench/providers.py                   # about 90 s on 2 vCPU
    python bench/providers.py --quick           # fewer calls and repetitions (about 40 s)
    python bench/providers.py --calls 1000 --history 12 28 100 --repeat 5 --json out.json
    python bench/providers.py --vendor anthropic
    python bench/providers.py --profile openai  # only: cProfile of each per-call variant
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anthropic as anthropic_sdk
import httpx2
import openai as openai_sdk
from common import (
    MODEL,
    SYSTEM,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_SCHEMA,
    Conversation,
    conversation_agent,
    conversation_order,
    environment,
    final_text,
    print_environment,
    profile_report,
    remove_db,
    run_agent_conversation,
    run_plain_conversation,
    user_text,
    write_figures,
)

import agentfootprint as af
from agentfootprint import providers
from agentfootprint.runtime.provider import Request
from agentfootprint.testing import fake_anthropic, fake_openai

KEY = "bench-key-not-a-secret"
#: the per-call requests are the last call of a conversation of this many iterations
#: (``--history``): 12 is 3 turns, 29 messages (~10 KB); 100 is 25 turns, 249 (~82 KB)
HISTORIES = (12, 100)
VARIANTS = ("bare", "adapter", "bare stream", "adapter stream")
TARGET_RATIO = 1.2
TARGET_MS = 1.0

Call = Callable[[], Awaitable[str]]
#: what a bare reply reader returns: the text and the tool calls (id, name, arguments)
Reply = tuple[str, list[tuple[str, str, Any]]]
ToolFn = Callable[[dict[str, Any]], str]


class Vendor(Protocol):
    name: str

    def start(self) -> None: ...
    def close(self) -> None: ...
    def adapter(self, *, stream: bool) -> Any: ...
    def kwargs(self, adapter: Any, request: Request) -> dict[str, Any]: ...
    def bare(self) -> Any: ...
    async def reply(self, client: Any, kwargs: dict[str, Any], *, stream: bool) -> Reply: ...
    async def plain_turn(
        self, messages: list[Any], user: str, tool: ToolFn, *, stream: bool
    ) -> str: ...
    def script_text(self, text: str) -> None: ...
    def script_conversation(self, conv: Conversation) -> None: ...
    def last_body(self) -> bytes: ...
    def drain(self) -> tuple[int, int, int]: ...


# -- OpenAI ------------------------------------------------------------------------------------
class OpenAIVendor:
    name = "openai"
    server: fake_openai.FakeOpenAI

    def start(self) -> None:
        self.server = fake_openai.FakeOpenAI().start()

    def close(self) -> None:
        self.server.close()

    def adapter(self, *, stream: bool) -> Any:
        return providers.openai(api_key=KEY, base_url=self.server.url, stream=stream)

    def kwargs(self, adapter: Any, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = adapter.body(request)
        return body

    def bare(self) -> openai_sdk.AsyncOpenAI:
        return openai_sdk.AsyncOpenAI(api_key=KEY, base_url=self.server.url, max_retries=0)

    async def reply(self, client: Any, kwargs: dict[str, Any], *, stream: bool) -> Reply:
        create = client.chat.completions.create
        if not stream:
            message = (await create(**kwargs)).choices[0].message
            calls = [
                (c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()
            ]
            return message.content or "", calls
        parts: list[str] = []
        slots: dict[int, list[Any]] = {}
        async with await create(**kwargs) as chunks:
            async for chunk in chunks:
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        parts.append(delta.content)
                    for tc in delta.tool_calls or ():
                        slot = slots.setdefault(tc.index, ["", "", []])
                        slot[0] = tc.id or slot[0]
                        if tc.function is not None:
                            slot[1] = slot[1] or tc.function.name or ""
                            slot[2].append(tc.function.arguments or "")
        return "".join(parts), [(i, n, "".join(a)) for _, (i, n, a) in sorted(slots.items())]

    async def plain_turn(
        self, messages: list[Any], user: str, tool: ToolFn, *, stream: bool
    ) -> str:
        if not messages:
            messages.append({"role": "system", "content": SYSTEM})
        messages.append({"role": "user", "content": user})
        tools = [
            {
                "type": "function",
                "function": {
                    "name": TOOL_NAME,
                    "description": TOOL_DESCRIPTION,
                    "parameters": TOOL_SCHEMA,
                },
            }
        ]
        extra: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
        async with self.bare() as client:
            while True:
                kwargs = {"model": MODEL, "messages": messages, "tools": tools}
                text, calls = await self.reply(
                    client, {**kwargs, **extra} if stream else kwargs, stream=stream
                )
                if not calls:
                    messages.append({"role": "assistant", "content": text})
                    return text
                messages.append(
                    {
                        "role": "assistant",
                        "content": text or None,
                        "tool_calls": [
                            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                            for i, n, a in calls
                        ],
                    }
                )
                for i, _, a in calls:
                    messages.append(
                        {"role": "tool", "tool_call_id": i, "content": tool(json.loads(a))}
                    )

    def script_text(self, text: str) -> None:
        self.server.add(fake_openai.reply(text))

    def script_conversation(self, conv: Conversation) -> None:
        self.server.add(
            *(
                fake_openai.scripted_reply(af.reply(item) if isinstance(item, str) else item)
                for item in conv.replies()
            )
        )

    def last_body(self) -> bytes:
        return self.server.requests[-1].body

    def drain(self) -> tuple[int, int, int]:
        """(requests, their body bytes, replies left over or unscripted), then forget them."""
        s = self.server
        with s._lock:
            out = (len(s.requests), sum(len(r.body) for r in s.requests), len(s.script))
            out = (out[0], out[1], out[2] + s.unscripted)
            s.requests.clear()
            s.script.clear()
            s.unscripted = 0
        return out


# -- Anthropic ---------------------------------------------------------------------------------
class AnthropicVendor:
    name = "anthropic"
    server: fake_anthropic.FakeAnthropic

    def start(self) -> None:
        self.server = fake_anthropic.FakeAnthropic().start()  # Nagle off, as FakeOpenAI

    def close(self) -> None:
        self.server.close()

    def adapter(self, *, stream: bool) -> Any:
        return providers.anthropic(api_key=KEY, base_url=self.server.url, stream=stream)

    def kwargs(self, adapter: Any, request: Request) -> dict[str, Any]:
        arguments: dict[str, Any] = adapter.arguments(request)
        return arguments

    def bare(self) -> anthropic_sdk.AsyncAnthropic:
        return anthropic_sdk.AsyncAnthropic(api_key=KEY, base_url=self.server.url, max_retries=0)

    async def reply(self, client: Any, kwargs: dict[str, Any], *, stream: bool) -> Reply:
        if not stream:
            message = await client.messages.create(**kwargs)
            text = "".join(b.text for b in message.content if b.type == "text")
            uses = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
            return text, uses
        blocks: dict[int, list[Any]] = {}
        events = await client.messages.create(**kwargs)
        try:
            async for event in events:
                if event.type == "content_block_start":
                    b = event.content_block
                    blocks[event.index] = [b.type, getattr(b, "id", ""), getattr(b, "name", ""), []]
                elif event.type == "content_block_delta":
                    delta = event.delta
                    part = delta.text if delta.type == "text_delta" else delta.partial_json
                    blocks[event.index][3].append(part)
        finally:
            await events.close()
        ordered = [blocks[i] for i in sorted(blocks)]
        text = "".join("".join(b[3]) for b in ordered if b[0] == "text")
        uses = [
            (b[1], b[2], json.loads("".join(b[3]) or "{}")) for b in ordered if b[0] == "tool_use"
        ]
        return text, uses

    async def plain_turn(
        self, messages: list[Any], user: str, tool: ToolFn, *, stream: bool
    ) -> str:
        messages.append({"role": "user", "content": user})
        base: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 1024,
            "system": [{"type": "text", "text": SYSTEM}],
            "tools": [
                {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": TOOL_SCHEMA}
            ],
        }
        if stream:
            base["stream"] = True
        async with self.bare() as client:
            while True:
                text, uses = await self.reply(client, {**base, "messages": messages}, stream=stream)
                if not uses:
                    messages.append({"role": "assistant", "content": text})
                    return text
                blocks = [{"type": "text", "text": text}] if text else []
                blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in uses]
                messages.append({"role": "assistant", "content": blocks})
                results = [
                    {"type": "tool_result", "tool_use_id": i, "content": tool(a)}
                    for i, _, a in uses
                ]
                messages.append({"role": "user", "content": results})

    def script_text(self, text: str) -> None:
        self.server.script(fake_anthropic.message(text))

    def script_conversation(self, conv: Conversation) -> None:
        items: list[dict[str, Any]] = []
        for item in conv.replies():
            if isinstance(item, str):
                items.append(fake_anthropic.message(item))
                continue
            uses = [fake_anthropic.tool_use(c.name, c.arguments, id=c.id) for c in item.tool_calls]
            items.append(fake_anthropic.message(item.content, tool_uses=uses))
        self.server.script(*items)

    def last_body(self) -> bytes:
        return self.server.received[-1].body

    def drain(self) -> tuple[int, int, int]:
        """(requests, their body bytes, replies left over or refused), then forget them."""
        s = self.server
        with s._lock:
            refused = sum(1 for r in s.received if r.path.split("?")[0] != "/v1/messages")
            out = (len(s.received), sum(len(r.body) for r in s.received), len(s._replies) + refused)
            s.received.clear()
            s._replies.clear()
        return out


VENDORS: dict[str, Callable[[], Vendor]] = {"openai": OpenAIVendor, "anthropic": AnthropicVendor}


def served_request(history: int) -> tuple[dict[str, Any], str]:
    """The served request of the last call of a ``history``-iteration conversation (as
    the agent serves it), and the reply that call gets."""
    conv = Conversation(history)
    mock = af.MockProvider(replies=conv.replies(), record=True)
    agent = conversation_agent(conv, mock, af.MemoryStore())
    previous: af.RunResult | None = None
    for turn in range(len(conv.turns)):
        previous = agent.run_sync(user_text(turn), continue_from=previous)
    return mock.requests[-1], final_text(len(conv.turns) - 1)


# -- (a) per call ------------------------------------------------------------------------------
async def _variants(
    vendor: Vendor, served: dict[str, Any], text: str
) -> tuple[dict[str, Call], Any]:
    """The four variants' calls (each returns the reply text) and what to close after;
    checks that bare and adapter send the same body and read the same reply."""
    adapters = {False: vendor.adapter(stream=False), True: vendor.adapter(stream=True)}
    client = vendor.bare()
    kwargs = {s: vendor.kwargs(a, Request.from_served(served)) for s, a in adapters.items()}

    def bare(stream: bool) -> Call:
        async def call() -> str:
            return (await vendor.reply(client, kwargs[stream], stream=stream))[0]

        return call

    def adapter(stream: bool) -> Call:
        async def call() -> str:
            return str((await adapters[stream].complete(Request.from_served(served))).content)

        return call

    calls = dict(
        zip(VARIANTS, (bare(False), adapter(False), bare(True), adapter(True)), strict=True)
    )
    bodies: dict[str, bytes] = {}
    for name, call in calls.items():
        vendor.script_text(text)
        if await call() != text:
            raise SystemExit(f"{vendor.name} {name}: the reply is not the scripted text")
        bodies[name] = vendor.last_body()
    for mode in ("", " stream"):
        if bodies["bare" + mode] != bodies["adapter" + mode]:
            raise SystemExit(f"{vendor.name}{mode}: bare SDK and adapter sent different bodies")
    print(
        f"# {vendor.name}: the same {len(bodies['bare']):,} / {len(bodies['bare stream']):,} "
        "request body bytes from bare SDK and adapter (plain / stream)"
    )
    return calls, (client, adapters)


async def _close(handles: Any) -> None:
    client, adapters = handles
    await client.close()
    for adapter in adapters.values():
        await adapter.aclose()


async def per_call(
    vendor: Vendor, served: dict[str, Any], text: str, n_calls: int, warmup: int
) -> dict[str, list[float]]:
    calls, handles = await _variants(vendor, served, text)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    try:
        for i in range(warmup + n_calls):
            if i % 50 == 0:
                gc.collect()
                vendor.drain()
            for name in VARIANTS if i % 2 == 0 else VARIANTS[::-1]:
                vendor.script_text(text)
                t0 = time.perf_counter()
                got = await calls[name]()
                elapsed = time.perf_counter() - t0
                if got != text:
                    raise SystemExit(f"{vendor.name} {name}: unexpected reply")
                if i >= warmup:
                    times[name].append(elapsed)
    finally:
        await _close(handles)
    if vendor.drain()[2]:
        raise SystemExit(f"{vendor.name}: the server's script and the calls disagree")
    return times


def per_call_rows(
    times: dict[tuple[str, int], dict[str, list[float]]], sizes: dict[int, tuple[int, int]]
) -> list[dict[str, Any]]:
    rows = []
    for (vendor, history), by_variant in times.items():
        for mode in ("", " stream"):
            bare = statistics.median(by_variant["bare" + mode]) * 1000
            adapter = statistics.median(by_variant["adapter" + mode]) * 1000
            rows.append(
                {
                    "vendor": vendor,
                    "mode": "stream" if mode else "plain",
                    "history": history,
                    "messages": sizes[history][0],
                    "served_chars": sizes[history][1],
                    "calls": len(by_variant["bare" + mode]),
                    "bare_ms": bare,
                    "adapter_ms": adapter,
                    "ratio": adapter / bare,
                    "diff_ms": adapter - bare,
                    "met": adapter / bare <= TARGET_RATIO or adapter - bare < TARGET_MS,
                }
            )
    return rows


def print_per_call(rows: list[dict[str, Any]]) -> None:
    print("\n## Per call (median ms; the fake server's time is in both columns)\n")
    print(
        "| vendor | mode | request: messages, KB | calls | bare SDK | adapter | adapter / bare "
        "| adapter - bare | target |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['vendor']} | {r['mode']} | {r['messages']}, {r['served_chars'] / 1000:.0f} "
            f"| {r['calls']} | {r['bare_ms']:.3f} | {r['adapter_ms']:.3f} | {r['ratio']:.2f}x "
            f"| {r['diff_ms']:+.3f} | {'met' if r['met'] else 'NOT MET'} |"
        )
    print(f"\ntarget: adapter / bare <= {TARGET_RATIO}x or adapter - bare < {TARGET_MS:g} ms")


# -- (b) per iteration -------------------------------------------------------------------------
def _agent_turns(agent: af.Agent, conv: Conversation) -> float:
    """``common.run_agent_conversation``'s loop and checks, for an agent built here."""
    seconds = 0.0
    previous: af.RunResult | None = None
    for turn, planned in enumerate(conv.turns):
        t0 = time.perf_counter()
        previous = agent.run_sync(user_text(turn), continue_from=previous)
        seconds += time.perf_counter() - t0
        if previous.outcome != "answered" or previous.iterations != len(planned) + 1:
            raise SystemExit(f"turn {turn}: {previous.outcome!r} after {previous.iterations}")
        if previous.answer != final_text(turn):
            raise SystemExit(f"turn {turn}: unexpected answer")
    return seconds


def _plain_turns(vendor: Vendor, conv: Conversation, stream: bool) -> float:
    """The conversation through the bare SDK: one ``asyncio.run`` and client per turn."""
    seconds = 0.0
    messages: list[Any] = []
    tool = conv.tool_fn()
    for turn in range(len(conv.turns)):
        t0 = time.perf_counter()
        answer = asyncio.run(vendor.plain_turn(messages, user_text(turn), tool, stream=stream))
        seconds += time.perf_counter() - t0
        if answer != final_text(turn):
            raise SystemExit(f"{vendor.name} bare loop, turn {turn}: unexpected answer")
    return seconds


def _verify(store: af.SqliteStore) -> None:
    results = list(af.Verifier(store).verify_all())
    bad = [r for _, r in results if getattr(r, "outcome", None) is not af.Outcome.VALID_UNSIGNED]
    if bad or len(results) != len(conversation_order(store)):
        raise SystemExit(f"{len(bad)} of {len(results)} runs did not verify: {bad[:1]!r}")


def _one(
    conv: Conversation, vendor: Vendor | None, stream: bool, recorded: bool, db: Path, verify: bool
) -> tuple[float, int]:
    """One conversation: (seconds, request body bytes the server received)."""
    if not recorded:
        if vendor is None:
            return run_plain_conversation(conv), 0
        vendor.script_conversation(conv)
        seconds = _plain_turns(vendor, conv, stream)
    else:
        remove_db(db)
        store = af.SqliteStore(db)
        try:
            if vendor is None:
                seconds = run_agent_conversation(conv, store).seconds
            else:
                vendor.script_conversation(conv)
                seconds = _agent_turns(
                    conversation_agent(conv, vendor.adapter(stream=stream), store), conv
                )
            if verify:
                _verify(store)
        finally:
            store.close()
            remove_db(db)
    if vendor is None:
        return seconds, 0
    requests, sent, left = vendor.drain()
    if left or requests != len(conv.replies()):
        raise SystemExit(f"{vendor.name}: {requests} requests, {left} replies left or refused")
    return seconds, sent


def per_iteration(
    vendors: dict[str, Vendor], n: int, repeat: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    rows: list[tuple[str, Vendor | None, bool]] = [("mock", None, False)]
    for name, vendor in vendors.items():
        rows += [(name, vendor, False), (f"{name} stream", vendor, True)]
    variants = [
        (f"{r[0]}/{kind}", *r, kind == "agent") for r in rows for kind in ("plain", "agent")
    ]
    seconds: dict[str, list[float]] = {v[0]: [] for v in variants}
    sent: dict[str, int] = {}
    conv = Conversation(n)
    with tempfile.TemporaryDirectory(prefix="afp-providers-") as tmp:
        db = Path(tmp) / "log.sqlite"
        for variant in variants:  # warm-up: imports, first calls
            _one(Conversation(8), *variant[2:], db, verify=False)
        for rep in range(repeat):
            shift = rep * len(variants) // repeat
            for variant in variants[shift:] + variants[:shift]:
                key = variant[0]
                gc.collect()
                elapsed, sent[key] = _one(conv, *variant[2:], db, rep == repeat - 1)
                seconds[key].append(elapsed)
    return seconds, sent


def per_iteration_rows(
    seconds: dict[str, list[float]], sent: dict[str, int], n: int, calls: int
) -> list[dict[str, Any]]:
    def ms(key: str) -> float:
        return statistics.median(seconds[key]) * 1000 / n

    mock = ms("mock/agent")
    out = []
    for key in seconds:
        name, kind = key.split("/")
        if kind != "agent":
            continue
        plain, agent = ms(f"{name}/plain"), ms(key)
        # the two ran next to each other in every repetition: the spread of their difference
        pairs = [
            (a - b) * 1000 / n for a, b in zip(seconds[key], seconds[f"{name}/plain"], strict=True)
        ]
        out.append(
            {
                "provider": name,
                "plain_ms": plain,
                "agent_ms": agent,
                "agent_over_plain_ms": agent - plain,
                "agent_over_plain_range_ms": (min(pairs), max(pairs)),
                "agent_ms_per_call": agent * n / calls,
                "extra_over_mock_ms": agent - mock,
                "adapter_share": (agent - mock) / agent,
                "plain_bytes_per_call": sent.get(f"{name}/plain", 0) / calls,
                "agent_bytes_per_call": sent.get(key, 0) / calls,
            }
        )
    return out


def print_per_iteration(rows: list[dict[str, Any]], n: int, calls: int, repeat: int) -> None:
    print(
        f"\n## Per iteration (N = {n}, {calls} model calls; median of {repeat}; ms per iteration)\n"
    )
    print(
        "| provider | plain loop, no agentfootprint | agent, recorded to SQLite "
        "| agent - plain (min to max) | agent, ms / call | agent - mock agent | adapter's share |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mock = r["provider"] == "mock"
        lo, hi = r["agent_over_plain_range_ms"]
        print(
            f"| {r['provider']} | {r['plain_ms']:.3f} | {r['agent_ms']:.3f} "
            f"| {r['agent_over_plain_ms']:+.3f} ({lo:+.2f} to {hi:+.2f}) "
            f"| {r['agent_ms_per_call']:.3f} "
            f"| {'-' if mock else format(r['extra_over_mock_ms'], '+.3f')} "
            f"| {'-' if mock else format(r['adapter_share'], '.0%')} |"
        )
    sent = ", ".join(
        f"{r['provider']} {r['plain_bytes_per_call'] / 1000:.1f} / "
        f"{r['agent_bytes_per_call'] / 1000:.1f}"
        for r in rows
        if r["provider"] != "mock"
    )
    print(f"\nrequest KB per call received by the server, plain loop / agent: {sent}")


def client_build_ms(vendors: dict[str, Vendor]) -> dict[str, float]:
    """Median ms to build one SDK client with its default HTTP client (the plain loop and
    the adapter build one per turn: an event loop each)."""
    out = {}
    for name, vendor in vendors.items():
        vendor.bare()
        times = []
        for _ in range(9):
            t0 = time.perf_counter()
            vendor.bare()
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times) * 1000
    return out


# -- profile -----------------------------------------------------------------------------------
def run_profile(vendor: Vendor, n_calls: int, top: int, history: int) -> None:
    """cProfile of ``n_calls`` calls of each per-call variant, one variant at a time (this
    thread only: the server's thread is not profiled)."""
    served, text = served_request(history)

    async def main() -> dict[str, tuple[cProfile.Profile, float]]:
        calls, handles = await _variants(vendor, served, text)
        out: dict[str, tuple[cProfile.Profile, float]] = {}
        try:
            for name in VARIANTS:
                for _ in range(20 + n_calls):
                    vendor.script_text(text)
                for _ in range(20):
                    await calls[name]()
                profiler = cProfile.Profile()
                t0 = time.perf_counter()
                profiler.enable()
                for _ in range(n_calls):
                    await calls[name]()
                profiler.disable()
                out[name] = (profiler, time.perf_counter() - t0)
                vendor.drain()
        finally:
            await _close(handles)
        return out

    profiles = asyncio.run(main())
    for name, (profiler, seconds) in profiles.items():
        title = (
            f"\n## {vendor.name}, {name}: {n_calls} calls, "
            f"{seconds * 1000 / n_calls:.3f} ms per call under the profiler"
        )
        print(profile_report(profiler, title, top))
    for mode in ("", " stream"):
        bare, adapter = (_by_function(profiles[v + mode][0]) for v in ("bare", "adapter"))
        print(f"\n## {vendor.name}{mode}: adapter - bare, own time per call (us; calls per call)")
        keys = set(bare) | set(adapter)
        none = (0.0, 0)
        moved = sorted(
            ((adapter.get(k, none)[0] - bare.get(k, none)[0], k) for k in keys), reverse=True
        )
        for diff, (where, function) in moved[:top]:
            calls = adapter.get((where, function), none)[1] / n_calls
            print(f"  {diff * 1e6 / n_calls:+8.1f}  {where}:{function}  ({calls:g})")
        total = sum(v[0] for v in adapter.values()) - sum(v[0] for v in bare.values())
        print(f"  {total * 1e6 / n_calls:+8.1f}  in all")


def _by_function(profiler: cProfile.Profile) -> dict[tuple[str, str], tuple[float, int]]:
    """(file, function) -> (own time, calls), summed over same-named functions."""
    import pstats

    out: dict[tuple[str, str], tuple[float, int]] = {}
    raw: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    for (filename, _line, name), (_cc, nc, tt, _ct, _callers) in raw.items():
        parts = Path(filename).parts
        key = ("/".join(parts[-2:]) if len(parts) > 1 else filename, name)
        t0, n0 = out.get(key, (0.0, 0))
        out[key] = (t0 + tt, n0 + nc)
    return out


# -- main --------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="150 calls, 3 repetitions")
    parser.add_argument("--calls", type=int, default=600, help="timed calls per variant")
    parser.add_argument("--warmup", type=int, default=30, help="untimed calls per variant first")
    parser.add_argument(
        "--history",
        type=int,
        nargs="+",
        default=list(HISTORIES),
        help="per-call requests: the last call of this many iterations (default 12 100)",
    )
    parser.add_argument(
        "--long-calls", type=int, default=60, help="timed calls per variant after the first history"
    )
    parser.add_argument("--n", type=int, default=50, help="conversation iterations (default 50)")
    parser.add_argument("--repeat", type=int, default=5, help="conversation repetitions")
    parser.add_argument("--vendor", choices=sorted(VENDORS), action="append", help="only these")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument("--profile", choices=sorted(VENDORS), help="only: cProfile per call")
    parser.add_argument("--top", type=int, default=25, help="functions shown by --profile")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.long_calls, args.warmup, args.repeat = 150, 30, 10, 3
    # the conversation's history passes context_budget's default (logged once per agent)
    logging.getLogger("agentfootprint.context").setLevel(logging.ERROR)
    if args.profile is not None:
        vendor = VENDORS[args.profile]()
        vendor.start()
        try:
            run_profile(vendor, args.calls, args.top, args.history[0])
        finally:
            vendor.close()
        return
    started = time.perf_counter()
    env = environment()
    env["versions"].update(
        openai=openai_sdk.__version__,
        anthropic=anthropic_sdk.__version__,
        httpx2=httpx2.__version__,
    )
    env["versions"] = {k: v for k, v in env["versions"].items() if not k.startswith("langgraph")}
    print_environment(env)
    vendors = {name: VENDORS[name]() for name in args.vendor or sorted(VENDORS, reverse=True)}
    for vendor in vendors.values():
        vendor.start()
    try:
        times: dict[tuple[str, int], dict[str, list[float]]] = {}
        sizes: dict[int, tuple[int, int]] = {}
        for index, history in enumerate(args.history):
            served, text = served_request(history)
            sizes[history] = (len(served["messages"]), len(json.dumps(served)))
            n_calls = args.calls if index == 0 else args.long_calls
            print(
                f"# per call, the served request after {history} iterations: "
                f"{sizes[history][1]:,} chars of JSON, {sizes[history][0]} messages; reply "
                f"{len(text)} chars; {args.warmup} warm-up + {n_calls} timed calls per "
                "variant, interleaved"
            )
            for name, vendor in vendors.items():
                times[name, history] = asyncio.run(
                    per_call(vendor, served, text, n_calls, args.warmup)
                )
        call_rows = per_call_rows(times, sizes)
        print_per_call(call_rows)
        seconds, sent = per_iteration(vendors, args.n, args.repeat)
        calls = len(Conversation(args.n).replies())
        iteration_rows = per_iteration_rows(seconds, sent, args.n, calls)
        print_per_iteration(iteration_rows, args.n, calls, args.repeat)
        builds = client_build_ms(vendors)
        turns = len(Conversation(args.n).turns)
        print(
            "building one SDK client: "
            + ", ".join(f"{k} {v:.1f} ms" for k, v in builds.items())
            + f"; once per turn ({turns} turns) in both columns, "
            + ", ".join(f"{k} {v * turns / args.n:.1f} ms" for k, v in builds.items())
            + " per iteration"
        )
    finally:
        for vendor in vendors.values():
            vendor.close()
    print(f"\n# {time.perf_counter() - started:.0f} s in all")
    write_figures(
        args.json,
        {
            "environment": env,
            "args": {k: str(v) for k, v in vars(args).items()},
            "per_call": call_rows,
            "per_call_seconds": {f"{v} {h}": t for (v, h), t in times.items()},
            "per_iteration": iteration_rows,
            "per_iteration_seconds": seconds,
            "client_build_ms": builds,
        },
    )


if __name__ == "__main__":
    main()
