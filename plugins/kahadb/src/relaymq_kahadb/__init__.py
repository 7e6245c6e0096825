"""RelayMQ KahaDB-style journal persistence adapter (kahaDB)"""
