"""Sources of objects and sinks of decisions."""
