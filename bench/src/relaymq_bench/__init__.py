"""RelayMQ broker-neutral load generator (relaymq-bench)"""
