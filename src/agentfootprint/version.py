"""The package version, at the bottom of the layers so any layer may record it."""

__version__ = "0.1.0"
