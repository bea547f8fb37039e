"""Synthetic clusters and the benchmarks that time a session over them."""
