"""Check the performance model against measurements (``validate``) and fit its efficiency
factors to them (``fit``). Pure: cases arrive resolved (model spec, GPU, configuration), and
results are values (``validation``: validate's typed result); ``tokenplan.api.resolve`` does the name
resolution, ``tokenplan.api.validate``/``tokenplan.api.calibrate`` the file I/O."""
