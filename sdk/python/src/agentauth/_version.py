"""The SDK's version: the project's (the repository's VERSION file)."""

__version__ = "0.21.0"
