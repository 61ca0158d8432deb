// The layers under Transport, re-exported: a service or test that imports Transport sees the event loop, the TCP
// connection and TLS streams as it did when they were one module.
@_exported import TCP
@_exported import TLSStreams
