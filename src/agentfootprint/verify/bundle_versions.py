"""The export bundle versions this version reads, and the one place that chooses among them.

A manifest's ``agentfootprint_bundle`` member names its bundle's version; :func:`bundle_shape`
turns that number into its :class:`BundleShape`, and the reader
(:mod:`agentfootprint.verify.bundle`) and the writer
(:mod:`agentfootprint.exchange.bundle_write`) ask the shape what differs by version (the
manifest's members, a signed checkpoint, each run entry's inclusion proof, the artifacts)
instead of comparing version numbers. docs/log-format.md section 13.1 is the normative text;
section 13.4 adds version 2, section 13.5 version 3 (artifacts, with or without a checkpoint:
two shapes of one version, told apart by the manifest's ``checkpoint`` member). Every version
begins with the same prefix and shares the framing of event lines and trailer; version 3 adds
artifact lines after the event lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

__all__ = [
    "BUNDLE_SHAPES",
    "BUNDLE_VERSION",
    "BUNDLE_VERSIONS",
    "ENTRY_KEYS",
    "MANIFEST_HEADER",
    "BundleShape",
    "UnknownBundleVersion",
    "bundle_shape",
    "listed_versions",
    "written_shape",
]

#: the manifest members every version holds with these exact values: the framing's
#: conventions (canonical form, hash, domain tags), never the log format of a run it carries
MANIFEST_HEADER: Final[Mapping[str, str]] = MappingProxyType(
    {"format": "agentfootprint/log/v1", "canon": "RFC8785", "hash": "SHA-256"}
)
_MANIFEST_KEYS: Final = frozenset(
    {"agentfootprint_bundle", "library", "runs", "policies", "counts", *MANIFEST_HEADER}
)
#: the members of a run entry in every version
ENTRY_KEYS: Final = frozenset(
    {
        "run_id",
        "conversation_id",
        "parent_run_id",
        "opened_at",
        "events",
        "last_type",
        "head",
        "policy_digest",
        "requested",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class BundleShape:
    """One bundle version: its number and what its manifest holds beyond every version's."""

    #: the manifest's ``agentfootprint_bundle``
    version: int
    #: the manifest carries ``checkpoint``, the signed checkpoint note of the exporting log's
    #: seal log (section 13.4)
    checkpoint: bool
    #: each run entry carries ``inclusion``: its claimed leaf and proof under the checkpoint
    #: (null for a run without a seal), so a version with it must carry the checkpoint
    entry_inclusion: bool
    #: the manifest carries ``artifacts`` and artifact lines follow the event lines (section
    #: 13.5, :mod:`agentfootprint.verify.bundle_artifacts`)
    artifacts: bool = False

    def __post_init__(self) -> None:
        if self.entry_inclusion and not self.checkpoint:
            raise ValueError(f"bundle version {self.version}: an inclusion needs a checkpoint")

    @property
    def manifest_keys(self) -> frozenset[str]:
        """The manifest's members, exactly."""
        keys = _MANIFEST_KEYS | {"checkpoint"} if self.checkpoint else _MANIFEST_KEYS
        return keys | {"artifacts"} if self.artifacts else keys

    @property
    def entry_keys(self) -> frozenset[str]:
        """A run entry's members, exactly."""
        return ENTRY_KEYS | {"inclusion"} if self.entry_inclusion else ENTRY_KEYS


_PLAIN: Final = BundleShape(version=1, checkpoint=False, entry_inclusion=False)
_CHECKPOINTED: Final = BundleShape(version=2, checkpoint=True, entry_inclusion=True)
#: version 3 is either: artifacts, with a checkpoint or without one
_ARTIFACTS: Final = BundleShape(version=3, checkpoint=False, entry_inclusion=False, artifacts=True)
_ARTIFACTS_CHECKPOINTED: Final = BundleShape(
    version=3, checkpoint=True, entry_inclusion=True, artifacts=True
)
#: every bundle shape this version reads, oldest version first
BUNDLE_SHAPES: Final = (_PLAIN, _CHECKPOINTED, _ARTIFACTS, _ARTIFACTS_CHECKPOINTED)
BUNDLE_VERSIONS: Final = tuple(dict.fromkeys(shape.version for shape in BUNDLE_SHAPES))
#: the newest version this reader knows; it reads every version from 1 on
BUNDLE_VERSION: Final = BUNDLE_VERSIONS[-1]


class UnknownBundleVersion(ValueError):
    """A manifest's ``agentfootprint_bundle`` this version does not read."""


def listed_versions(word: str) -> str:
    """The known versions as a reader's message names them: ``1, 2 and 3``, ``1, 2 or 3``."""
    *first, last = map(str, BUNDLE_VERSIONS)
    return f"{', '.join(first)} {word} {last}" if first else last


def bundle_shape(version: Any, *, checkpoint: bool = False) -> BundleShape:
    """The shape of bundle version ``version``; :class:`UnknownBundleVersion` for one this
    version does not read (its message is the reader's reason, pinned by tests/vectors).

    ``checkpoint``: whether the manifest has a ``checkpoint`` member. It chooses between the
    two shapes of version 3 only; versions 1 and 2 fix it (the manifest's members are then
    held to the version's, which refuses the other)."""
    number = type(version) is int  # only an integer names one: true and 1.0 equal 1 in Python
    if number and version == 1:
        return _PLAIN
    elif number and version == 2:
        return _CHECKPOINTED
    elif number and version == 3:
        return _ARTIFACTS_CHECKPOINTED if checkpoint else _ARTIFACTS
    else:
        raise UnknownBundleVersion(
            f"unknown bundle version {version!r} (this reader knows {listed_versions('and')})"
        )


def written_shape(*, checkpoint: bool, artifacts: bool = False) -> BundleShape:
    """The version a writer writes: the oldest that holds what the bundle carries, so that a
    bundle without a checkpoint or artifacts is version 1, which every reader reads, and one
    with a checkpoint but no artifacts version 2 (section 13.1)."""
    return next(
        shape
        for shape in BUNDLE_SHAPES
        if shape.checkpoint == checkpoint and shape.artifacts == artifacts
    )
