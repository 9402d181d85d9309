"""WebSocket transports (Responses WebSocket mode, Realtime): docs/ARCHITECTURE.md, "WebSocket transports"."""
