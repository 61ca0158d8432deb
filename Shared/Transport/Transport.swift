// Transport
