"""RelayMQ AMQP 1.0 transport (amqp://, amqps://)"""
