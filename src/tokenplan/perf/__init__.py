"""Performance of one deployment (a replica of TP×PP GPUs; DP replicas side by side).

Pure functions of values: no I/O, no clock, no catalog lookups.
"""
