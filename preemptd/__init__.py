"""preemptd: admission, preemption and reclaim for Kubernetes queues."""

__version__ = "0.1.0"
