// ServiceAPI: what schema-gen generates per proto service (Generated/, one file per .proto with services):
//
//   extension ZooV1.Zoo {
//       public protocol ServiceProtocol: RPCService   one requirement per rpc; a missing one does not compile
//       public struct Client                          ZooV1.Zoo.Client(wrapping: rpcClient).searchAnimals(request)
//   }
//   extension ZooV1.Zoo.ServiceProtocol { public func register(in:) }   routes every rpc to its method
//
// A service's Service module conforms to the protocol; the gateway's command groups call through the client.
// The method descriptors (`ZooV1.Zoo.searchAnimals`) stay in Schema, where RPC's built-in services use them.
