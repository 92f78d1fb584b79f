"""Request projection v1: five state keys, served as they are (log formats v1 to v4).

=============  ==================================  ===========
request field  state key                           default
=============  ==================================  ===========
``model``      ``model``                           (required)
``params``     ``params``                          ``{}``
``system``     ``system_pieces``                   ``[]``
``messages``   ``history``                         ``[]``
``tools``      ``tool_schemas``                    ``[]``
=============  ==================================  ===========

Every later projection serves these five fields (v2 edits two of them, v3 adds one), so
:data:`FIELDS` is shared. docs/log-format.md section 8.
"""

from __future__ import annotations

from typing import Final

from agentfootprint.logformat.projection_spec import Field, Projection
from agentfootprint.logformat.shared_lists import SharedList

__all__ = ["FIELDS", "PROJECTION_V1"]

_ARRAY: Final = (list, tuple, SharedList)  # a SharedList: a list the verifier folded
#: the five request fields of request shape 1, in served order
FIELDS: Final = (
    Field(name="model", key="model", tag=None, kind=str, kind_name="a string", default=None),
    Field(name="params", key="params", tag=None, kind=dict, kind_name="an object", default=dict),
    Field(
        name="system",
        key="system_pieces",
        tag="piece/system",
        kind=_ARRAY,
        kind_name="an array",
        default=list,
    ),
    Field(
        name="messages",
        key="history",
        tag="piece/message",
        kind=_ARRAY,
        kind_name="an array",
        default=list,
    ),
    Field(
        name="tools",
        key="tool_schemas",
        tag="piece/tool",
        kind=_ARRAY,
        kind_name="an array",
        default=list,
    ),
)

#: v1: five state keys, served as they are.
PROJECTION_V1: Final = Projection(version=1, request_version=1, fields=FIELDS, grows="messages")
