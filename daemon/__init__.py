"""I/O and process: CLI, configuration, backends, the daemon loop."""
