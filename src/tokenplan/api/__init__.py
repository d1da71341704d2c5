"""The Python API: one module per command — request in, result out.

``plan``, ``predict``, ``memory``, ``catalog``, ``validate``, ``calibrate``, ``bench``,
``generate`` (``generate_ray`` for ``--backend ray``) and ``report``. They share lower layers
(``tokenplan.api.resolve``: requests resolved once to a scenario; ``bands``: error bands), never one
another. Nothing is imported here, so importing one command does not load the others.
"""
