"""Check the performance model against measurements (``validate``) and fit its efficiency
factors to them (``fit``). Pure: cases arrive resolved (model spec, GPU, configuration), and
results are values; ``tokenplan.api.validate``/``tokenplan.api.calibrate`` does the name resolution and file I/O."""
