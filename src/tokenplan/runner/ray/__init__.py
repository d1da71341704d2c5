"""The Ray backend: an actor pool fed by one driver; Ray itself is imported only by the driver when a run starts."""
