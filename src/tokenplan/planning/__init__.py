"""Planning: search the layouts, formats, speculative settings and batch caps of each hardware
option; rank by wall time and by cost; keep every rejection with its reason; answer the plan
(``answer``: the result, its notes, provisioning in ``targets``, ``--current`` in ``current``,
the typed results in ``results``). Pure functions: names arrive resolved (``tokenplan.api.resolve``)."""
