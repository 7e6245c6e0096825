"""RelayMQ virtual topics, composite and filtered destinations (virtualDestinationInterceptor)"""
