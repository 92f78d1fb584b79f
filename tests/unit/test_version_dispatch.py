"""The version dispatchers: each version lives in its own module and is chosen in one place
(log_formats.log_format, projection.projection, commitments.pattern_rules, and for export
bundles bundle_versions.bundle_shape); these tests pin what each dispatch returns and
refuses, so a version added later cannot change how a recorded one reads."""

from __future__ import annotations

from typing import Any

import pytest

from agentfootprint.logformat import (
    log_format_v1,
    log_format_v2,
    log_format_v3,
    log_format_v4,
    log_format_v5,
    log_format_v6,
    policy_v1,
    policy_v2,
    projection_v1,
    projection_v2,
    projection_v3,
    projection_v4,
)
from agentfootprint.logformat.calls import commit_calls
from agentfootprint.logformat.commitments import (
    LEGACY_POLICY_VERSION,
    POLICY_VERSION,
    RE2_POLICY_VERSION,
    PolicyDocument,
    pattern_rules,
)
from agentfootprint.logformat.log_formats import (
    LOG_FORMATS,
    UnknownLogFormat,
    known_log_format,
    log_format,
)
from agentfootprint.logformat.projection import ProjectionError, projection, recorded_projection
from agentfootprint.verify.bundle_versions import (
    BUNDLE_VERSIONS,
    UnknownBundleVersion,
    bundle_shape,
    written_shape,
)

V1, V2, V3, V4, V5, V6 = (f"agentfootprint/log/v{n}" for n in (1, 2, 3, 4, 5, 6))


def test_the_formats_and_their_rules() -> None:
    assert LOG_FORMATS == (V1, V2, V3, V4, V5, V6)
    formats = [log_format(name) for name in LOG_FORMATS]
    assert frozenset({V2, V3, V4, V5, V6}) == {f.name for f in formats if f.marks_calls}
    assert frozenset({V3, V4, V5, V6}) == {f.name for f in formats if f.writes_ahead}
    assert frozenset({V4, V5, V6}) == {f.name for f in formats if f.may_seal}
    assert frozenset({V5, V6}) == {f.name for f in formats if f.may_pause}
    assert frozenset({V6}) == {f.name for f in formats if f.records_reads}
    modules = (
        log_format_v1,
        log_format_v2,
        log_format_v3,
        log_format_v4,
        log_format_v5,
        log_format_v6,
    )
    for number, (name, module) in enumerate(zip(LOG_FORMATS, modules, strict=True), 1):
        assert log_format(name) is module.FORMAT and module.FORMAT.version == number
    assert [log_format(n).implied_projection for n in LOG_FORMATS] == [1] + [None] * 5


@pytest.mark.parametrize("name", ["agentfootprint/log/v7", "agentfootprint/log/V1", "", None, 1])
def test_an_unknown_format_is_refused(name: Any) -> None:
    assert known_log_format(name) is None
    with pytest.raises(UnknownLogFormat, match="unknown log format"):
        log_format(name)
    with pytest.raises(ValueError, match="unknown log format"):
        commit_calls(name, {"stage": "call-llm", "call": 0}, 0)


def test_the_call_rule_of_each_format() -> None:
    stage_only, marked = {"stage": "call-llm"}, {"stage": "summarise", "call": 3}
    assert [commit_calls(n, stage_only, 0) for n in LOG_FORMATS] == [1, 0, 0, 0, 0, 0]
    assert [commit_calls(n, marked, 0) for n in LOG_FORMATS] == [0, 1, 1, 1, 1, 1]
    assert [commit_calls(n, marked, 2) for n in (*LOG_FORMATS, "unknown")] == [2] * 7


def test_the_projections_and_their_dispatch() -> None:
    expected = {
        1: projection_v1.PROJECTION_V1,
        2: projection_v2.PROJECTION_V2,
        3: projection_v3.PROJECTION_V3,
        4: projection_v4.PROJECTION_V4,
    }
    for version, spec in expected.items():
        assert projection(version) is spec and spec.version == version
    assert [expected[v].request_version for v in (1, 2, 3, 4)] == [1, 1, 2, 2]
    for refused in (0, 5, True, "1", 4.0, None):
        with pytest.raises(ProjectionError):
            projection(refused)


def test_an_absent_projection_reads_as_projection_1_in_format_v1_only() -> None:
    assert recorded_projection({"format": V1}) is projection_v1.PROJECTION_V1
    for name in (V2, V3, V4, "agentfootprint/log/v9", None):
        with pytest.raises(ProjectionError, match="no projection member"):
            recorded_projection({"format": name})
    opened = {"format": V1, "projection": {"version": 2}}
    assert recorded_projection(opened) is projection_v2.PROJECTION_V2


def test_the_policy_versions_and_their_dispatch() -> None:
    assert pattern_rules(LEGACY_POLICY_VERSION) is policy_v1.RULES
    assert pattern_rules(RE2_POLICY_VERSION) is policy_v2.RULES
    assert pattern_rules(POLICY_VERSION) is policy_v2.RULES  # version 2's patterns, and echoes
    for refused in (0, 4, True, 2.0, 3.0, "2", None):
        with pytest.raises(ValueError, match="unknown policy version"):
            pattern_rules(refused)
    # a backreference is Python re, not RE2: each version names its own syntax
    v1 = PolicyDocument.from_json({"v": 1, "keys": [], "patterns": [r"(a)\1"]})
    assert v1.version == 1 and v1.matcher()("aa") and not v1.matcher()("ab")
    with pytest.raises(ValueError, match="is not RE2 syntax"):
        PolicyDocument.from_json({"v": 2, "keys": [], "patterns": [r"(a)\1"]})
    with pytest.raises(ValueError, match="is not a Python regular expression"):
        PolicyDocument.from_json({"v": 1, "keys": [], "patterns": ["("]})


def test_the_bundle_versions_and_their_dispatch() -> None:
    assert BUNDLE_VERSIONS == (1, 2, 3)
    plain, checkpointed = bundle_shape(1), bundle_shape(2)
    assert (plain.checkpoint, plain.entry_inclusion, plain.artifacts) == (False, False, False)
    assert (checkpointed.checkpoint, checkpointed.entry_inclusion) == (True, True)
    assert not checkpointed.artifacts
    assert checkpointed.manifest_keys - plain.manifest_keys == {"checkpoint"}
    assert checkpointed.entry_keys - plain.entry_keys == {"inclusion"}
    # version 1 and 2 fix whether a checkpoint is there: the manifest's members then refuse
    assert bundle_shape(1, checkpoint=True) is plain
    assert bundle_shape(2, checkpoint=False) is checkpointed
    # version 3 (section 13.5): artifacts, with a checkpoint or without one
    carried, both = bundle_shape(3), bundle_shape(3, checkpoint=True)
    assert carried.version == both.version == 3 and carried.artifacts and both.artifacts
    assert carried.manifest_keys - plain.manifest_keys == {"artifacts"}
    assert carried.entry_keys == plain.entry_keys
    assert both.manifest_keys - checkpointed.manifest_keys == {"artifacts"}
    assert both.entry_keys == checkpointed.entry_keys
    assert written_shape(checkpoint=False) is plain
    assert written_shape(checkpoint=True) is checkpointed
    assert written_shape(checkpoint=False, artifacts=True) is carried
    assert written_shape(checkpoint=True, artifacts=True) is both


@pytest.mark.parametrize("version", [0, 4, True, 1.0, "1", None])
def test_an_unknown_bundle_version_is_refused(version: Any) -> None:
    with pytest.raises(UnknownBundleVersion, match=r"\(this reader knows 1, 2 and 3\)"):
        bundle_shape(version)
