"""The runtime engine: the run loop, its ports, stage scopes, events, tools and the provider
protocol. It runs whatever chart of stages it is given and imports no feature module.
"""
