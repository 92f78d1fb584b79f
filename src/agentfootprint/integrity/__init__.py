"""Integrity findings: pure functions of the committed record (docs/integrity.md).

Every check here is a function of JSON the log holds (a tool's committed contract, the
history, a served request, a recorded decision), never of live objects, clocks or chance. The
run files what they find; ``agentfootprint findings --recompute`` runs the same functions
over the log and compares: a finding is a claim anyone can re-derive, not the writer's word.
This package imports nothing above :mod:`agentfootprint.logformat`.
"""
