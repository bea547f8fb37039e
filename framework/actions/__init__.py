"""Actions run in order inside a session; each is mechanism, plugins are policy."""
