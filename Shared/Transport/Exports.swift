// The layers under Transport, re-exported: a service or test that imports Transport sees the event loop, the TCP
// connection and TLS streams as it did when they were one module.
@_exported import Connect
@_exported import Framing
@_exported import ServerSeam
@_exported import TCP
@_exported import TLSStreams
