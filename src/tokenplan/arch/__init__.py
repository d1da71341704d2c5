"""What a model is, from its Hugging Face ``config.json``: layer kinds, shapes, parameter counts,
KV-cache and recurrent-state sizes, FLOPs and bytes per token. Pure functions of the config."""
