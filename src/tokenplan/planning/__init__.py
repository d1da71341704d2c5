"""Planning: search the layouts, formats, speculative settings and batch caps of each hardware
option; rank by wall time and by cost; keep every rejection with its reason. Pure functions."""
