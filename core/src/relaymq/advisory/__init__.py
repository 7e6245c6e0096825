"""ActiveMQ advisory topics (`advisorySupport`): see docs/advisories.md."""

from relaymq.advisory.service import AdvisoryService

__all__ = ["AdvisoryService"]
