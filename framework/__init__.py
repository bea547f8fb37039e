"""The pure scheduling core: no I/O, no asyncio, no Kubernetes client."""
