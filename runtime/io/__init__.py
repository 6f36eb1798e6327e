"""Sockets and processes: the asyncio connection and pool that drive a sans-IO protocol
object over TCP or TLS (``connection``), reconnect backoff (``backoff``) and what the embedded
peers' command-line runners share (``cli``). New I/O helpers of the runtime belong here."""
