"""Test support: a fault-injecting OpenAI-compatible server and a tiny locally built model."""
