"""Built-in policy plugins. Each depends only on :mod:`preemptd.framework`."""
