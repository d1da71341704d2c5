"""`generate`: run a job exactly once through OpenAI-compatible servers, resumable after any crash."""
