import ComposeKit
import Foundation
import GatewayKit

// menagerie-compose: compose's logic once the build is done. compose/compose (bash) installs, builds and hands
// over to it; it reads the services file through GatewayKit's ServiceList, the file's one parser.
//
//   menagerie-compose up|down|ps|scale|logs|restart|node|cluster …
//                                     compose's commands (compose/compose documents them; it builds, then hands
//                                     them over, having set MENAGERIE_COMPOSE_HOME, _CONFIG, _STATE_DIR and _CACHE_DIR)
//   menagerie-compose config          the services file as read (or what is wrong in it)
//   menagerie-compose list [KEY]      the services, one a line; with KEY (proto, models, container, kubernetes,
//                                     cluster, port), each service's value beside its name (paths made absolute),
//                                     the services that set none left out (for the deploy scripts)
//   menagerie-compose render containers|kubernetes [--out DIR] [SERVICE…]
//                                     each service's Containerfile or Kubernetes manifest (and the kustomization),
//                                     rendered from the services file into its `container` or `kubernetes` file

/// Runs `body`; a `ComposeFailure` is said as compose says it and exits 1.
func composing(_ body: () throws -> Void) -> Never {
    do {
        try body()
        exit(0)
    } catch let failure as ComposeFailure {
        FileHandle.standardError.write(Data("compose: \(failure.message)\n".utf8))
        exit(1)
    } catch {
        FileHandle.standardError.write(Data("compose: \(error)\n".utf8))
        exit(1)
    }
}

func write(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }

let arguments = Array(CommandLine.arguments.dropFirst())
composing {
    let command = arguments.first ?? ""
    let rest = Array(arguments.dropFirst())
    switch command {
    case "config":
        write(ServiceList.render(try Manifest.load().services))
    case "list":
        guard rest.count <= 1 else { throw ComposeFailure("usage: menagerie-compose list [KEY]") }
        let manifest = try Manifest.load()
        for service in manifest.services {
            guard let key = rest.first else {
                write(service.name + "\n")
                continue
            }
            let value: String? =
                switch key {
                case "proto": service.proto
                case "models": service.models.isEmpty ? nil : service.models.joined(separator: " ")
                case "container": service.container.map(manifest.resolve)
                case "kubernetes": service.kubernetes.map(manifest.resolve)
                case "cluster": service.cluster ? "yes" : nil
                case "port": String(service.port)
                default:
                    throw ComposeFailure(
                        "usage: menagerie-compose list [proto | models | container | kubernetes | cluster | port]")
                }
            if let value { write("\(service.name) \(value)\n") }
        }
    case "render":
        let manifest = try Manifest.load()
        for (path, text) in try Rendering.files(rest, of: manifest) {
            try Files.makeDirectory(URL(fileURLWithPath: path).deletingLastPathComponent().path)
            try Files.write(text, to: path)
            Compose.say("rendered \(path)")
        }
    case "up":
        let compose = try Compose.load()
        try compose.lockState()
        try compose.up(rest)
    case "check-up":
        try Compose.load().up(rest, checkOnly: true)
    case "down":
        let compose = try Compose.load()
        try compose.lockState()
        try compose.down()
    case "ps":
        try Compose.load().ps()
    case "scale":
        let compose = try Compose.load()
        try compose.lockState()
        try compose.scale(rest)
    case "logs":
        try Compose.load().logs(rest)
    case "restart":
        let compose = try Compose.load()
        try compose.lockState()
        try compose.restart(rest)
    case "node":
        let compose = try Compose.load()
        if rest.first != "list" { try compose.lockState() }
        try compose.node(rest)
    case "cluster":
        try Compose.load().cluster(rest)
    default:
        throw ComposeFailure(
            "usage: menagerie-compose up | down | ps | scale | logs | restart | node | cluster | config | list [KEY] | render (run through compose/compose)"
        )
    }
}
