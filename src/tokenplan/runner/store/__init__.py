"""The run directory: records appended whole, the manifest, the done-set, fencing, invocations, the summary and the exports."""
