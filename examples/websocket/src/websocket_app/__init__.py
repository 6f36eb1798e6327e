"""A WebSocket (RFC 6455) client on the bindings protoframe generates into ``proto``."""
