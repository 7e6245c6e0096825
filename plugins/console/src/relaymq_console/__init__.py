"""The RelayMQ console: web UI, REST API, Prometheus metrics, ActiveMQ-compatible
monitoring endpoints and an admin CLI, on the kernel's management API (docs/console.md)."""
