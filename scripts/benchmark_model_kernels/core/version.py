"""The tool's version: `--version`, results.json's `tool_version` and the package metadata."""

__version__ = "0.1.0"
