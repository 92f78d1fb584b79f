"""Features: one module per option or group of options, each exporting ``FEATURE``.

See :mod:`agentfootprint.features.base` for what a feature declares and
:mod:`agentfootprint.features.registry` for what derives from the declarations. The loop's
own slots (the turn, the system prompt, messages, tools, the model call, routing, tool
dispatch, the final answer) are features on the same seam as every option.
"""
