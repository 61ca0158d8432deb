// RPC
