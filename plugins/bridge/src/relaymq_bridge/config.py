"""A bridge's parameters: Artemis' JMSBridge ones, spelled as in its XML."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from relaymq.config.model import Origin
from relaymq.config.report import at
from relaymq.errors import ConfigError


class QualityOfService(enum.StrEnum):
    AT_MOST_ONCE = "AT_MOST_ONCE"
    DUPLICATES_OK = "DUPLICATES_OK"
    ONCE_AND_ONLY_ONCE = "ONCE_AND_ONLY_ONCE"


@dataclass
class BridgeConfig:
    """``<bridge .../>``: attributes in kebab-case (``source-uri``) or camelCase."""

    name: str
    source_uri: str
    source_destination: str
    target_uri: str
    target_destination: str
    source_user: str | None = None
    source_password: str | None = None
    target_user: str | None = None
    target_password: str | None = None
    quality_of_service: QualityOfService = QualityOfService.DUPLICATES_OK
    #: messages per batch (>= 1)
    max_batch_size: int = 1
    #: ms to wait for a batch to fill; -1 waits until max-batch-size messages came
    max_batch_time: int = -1
    #: ms between attempts to connect again after a failure
    failure_retry_interval: int = 5000
    #: attempts after a failure before the bridge stops; -1 forever
    max_retries: int = -1
    selector: str | None = None
    #: durable topic subscription on the source (needs client-id)
    subscription_name: str | None = None
    client_id: str | None = None
    add_message_id_in_header: bool = False
    #: ms the target may take to settle a batch before the bridge counts it as failed
    #: (RelayMQ's; Artemis' clients have a 30 s call timeout)
    send_timeout: int = 30000
    #: does the target drop resent `_AMQ_DUPL_ID`s? auto: not ActiveMQ Classic or RabbitMQ
    #: (their STOMP `server` header); false makes ONCE_AND_ONLY_ONCE use a STOMP
    #: transaction and a marker queue on the target
    target_duplicate_detection: str = "auto"
    auto_start: bool = True
    origin: Origin | None = None

    def validate(self) -> BridgeConfig:
        where = f"<bridge name=\"{self.name}\">{at(self.origin)}"
        errors = []
        if self.max_batch_size < 1:
            errors.append(f"{where}: max-batch-size must be >= 1 (got {self.max_batch_size})")
        if self.max_batch_time != -1 and self.max_batch_time < 1:
            errors.append(f"{where}: max-batch-time must be -1 (wait for a full batch) or >= 1 ms "
                          f"(got {self.max_batch_time})")
        if self.target_duplicate_detection not in ("auto", "true", "false"):
            errors.append(f"{where}: target-duplicate-detection is auto, true or false "
                          f"(got {self.target_duplicate_detection!r})")
        if self.send_timeout < 1:
            errors.append(f"{where}: send-timeout must be >= 1 ms")
        if self.failure_retry_interval < 0:
            errors.append(f"{where}: failure-retry-interval must be >= 0 ms")
        if self.max_retries < -1:
            errors.append(f"{where}: max-retries must be -1 (forever) or >= 0")
        if self.subscription_name and not self.client_id:
            errors.append(f"{where}: subscription-name needs client-id (a durable subscription "
                          "is named by both)")
        if self.selector:
            from relaymq.selector import Selector

            try:
                Selector.compile(self.selector)
            except Exception as exc:  # noqa: BLE001 - the parser's own message says what is wrong
                errors.append(f"{where}: invalid selector {self.selector!r}: {exc}")
        if errors:
            raise ConfigError("\n".join(errors), errors)
        return self
