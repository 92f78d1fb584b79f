"""The log format kernel: canonical JSON, digests, the hash chain, the fold of stage writes into
state, and the request projection. Everything above (stores, the verifier, the runtime) agrees
on the log through this layer; it imports nothing of the project but errors.
"""
