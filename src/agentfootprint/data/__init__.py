"""Data shipped with the library, read with :mod:`importlib.resources` (not code).

``pricing.json``: list prices of common OpenAI and Anthropic models, in USD per million
tokens, dated and with their source named; the ``pricing_table=True`` option reads it
(:mod:`agentfootprint.features.pricing_table`). Override it with your contract prices.
"""
