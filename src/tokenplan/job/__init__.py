"""From step times to a whole job: length distributions, continuous batching in steady state,
ramp-up and drain, GPU-hours and dollars. Pure functions of values."""
