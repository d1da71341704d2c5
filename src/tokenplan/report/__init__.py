"""Presentation only: rich tables and small text charts for the CLI."""
