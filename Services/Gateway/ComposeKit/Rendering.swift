import Foundation
import GatewayKit

/// A service's deploy files, rendered from what the services file says of it (port, models, cluster, blobs, args,
/// packages, pods, resources, volume): its Containerfile and its Kubernetes manifest, and the kustomization that lists
/// them all. A new service gets them from its section; the files in deploy/ are this rendering's output, which
/// ComposeKitTests hold them to (`compose/compose render containers|kubernetes` writes them again).
public enum Rendering {
    /// The one-way latency in ms the pods' dqlite clusters derive their timeouts from (compose's default).
    static let clusterLatency = 20
    /// Where the Kubernetes manifests put the TLS files (the Secret make-secrets' files become) and the data.
    static let tlsArguments = [
        "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key", "--tls-ca", "/tls/ca.crt",
    ]

    /// The arguments every deployed replica starts with (before its `arg`s): all addresses, its port, /data, JSON logs.
    static func baseArguments(_ service: ServiceSettings) -> [String] {
        ["--host", "0.0.0.0", "--port", String(service.port), "--data-dir", "/data", "--log-format", "json"]
    }

    // MARK: The Containerfile

    /// `service`'s Containerfile: Debian 12 slim with its `packages`, its binary and the gateway's (deploy/build-images
    /// puts them in the context), its models' folders, running as an unprivileged user on /data.
    public static func containerfile(_ service: ServiceSettings) throws(ComposeFailure) -> String {
        let name = service.name
        guard !service.packages.isEmpty else {
            throw ComposeFailure(
                "[\(name)] names no packages for its image (packages = …: deploy/runtime-packages prints what its binaries link)"
            )
        }
        var lines = comment(
            "Rendered by `compose/compose render containers` from the services file's [\(name)]: edit that, then render"
                + " again (ComposeKitTests fail while this file differs from its rendering).")
        lines += comment(
            "The \(name) service on Debian 12: its release binary (the Swift runtime linked in), the gateway (the probes"
                + " run `gateway probe`) and SwiftPM's resource bundles (bin/*.resources), built by deploy/build-images"
                + " from .build/images/\(name). PACKAGES: its `packages`, the Debian packages holding the libraries the"
                + " two binaries link (deploy/runtime-packages prints them; build-images and DeployTests hold this list"
                + " to it) and the data they read; apt brings their dependencies.")
        if !service.models.isEmpty {
            lines += comment(
                "Its models (`models`: \(service.models.joined(separator: " "))) are copied by build-images into"
                    + " /opt/menagerie/MODEL when compose installed them (compose/compose MODEL); a folder is empty"
                    + " otherwise, and the service starts without that model, saying so.")
        }
        lines += [
            "FROM docker.io/library/debian:12-slim",
            "ARG PACKAGES=\"\(service.packages.joined(separator: " "))\"",
            "RUN apt-get update \\",
            " && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PACKAGES \\",
            " && rm -rf /var/lib/apt/lists/* \\",
            " && useradd --system --uid 10001 --user-group --no-create-home --home-dir /data menagerie \\",
            " && mkdir -p /data && chown menagerie:menagerie /data",
            "COPY bin/ /opt/menagerie/",
        ]
        lines += service.models.map { "COPY \($0)/ /opt/menagerie/\($0)/" }
        lines.append("ENV PATH=/opt/menagerie:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        lines += service.models.map { "ENV \(Manifest.variable(ofModel: $0))=/opt/menagerie/\($0)" }
        lines += [
            "USER 10001:10001", "WORKDIR /data", "VOLUME /data", "EXPOSE \(service.port)",
            "ENTRYPOINT [\"/opt/menagerie/\(name)\"]",
        ]
        lines += comment(
            "Off loopback a service serves TLS only: the certificate, its key and the CA are mounted at /tls (the"
                + " Kubernetes manifests mount the Secret there); without them it refuses to start, saying why."
                + (service.arguments.isEmpty ? "" : " Then its `arg`s, verbatim (a relative path starts at /data)."))
        let command = baseArguments(service) + tlsArguments + service.arguments
        lines.append("CMD [" + command.map(quoted).joined(separator: ", ") + "]")
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: The Kubernetes manifest

    /// How a service runs on Kubernetes, from its `pods`, `volume` and `cluster`.
    enum Shape {
        /// No volume: its data dies with the pod, any number of pods serve alike.
        case deployment
        /// A volume per pod, each pod its own database.
        case statefulSet
        /// A volume per pod, the pods one dqlite cluster.
        case cluster
    }

    static func shape(_ service: ServiceSettings) throws(ComposeFailure) -> Shape {
        let name = service.name
        guard service.volume != nil else {
            guard !service.cluster || service.pods == 1 else {
                throw ComposeFailure(
                    "[\(name)]'s \(service.pods) pods would form a cluster with no volume for its Raft log (volume = SIZE)"
                )
            }
            return .deployment
        }
        guard service.pods > 1 else { return .statefulSet }
        guard service.cluster else {
            throw ComposeFailure(
                "[\(name)]'s \(service.pods) pods would each keep a database of their own (cluster = yes, or pods = 1)")
        }
        guard !service.blobs else {
            throw ComposeFailure(
                "[\(name)] keeps its blobs on its nodes (blobs = yes), whose peers (--blob-peers) the rendering does not write yet: pods = 1"
            )
        }
        return .cluster
    }

    /// `service`'s Kubernetes manifest: a Deployment or StatefulSet of its `pods`, the headless Service the gateway
    /// resolves (and, clustered, the one its members find each other through), and a PodDisruptionBudget.
    public static func kubernetes(_ service: ServiceSettings) throws(ComposeFailure) -> String {
        let name = service.name, port = service.port, pods = service.pods
        guard let resources = service.resources else {
            throw ComposeFailure(
                "[\(name)] names no resources for its pods (resources = CPU MEMORY LIMIT: 250m 256Mi 1Gi)")
        }
        let shape = try shape(service)
        let raft = port + 1000
        let labels = ["  labels:", "    app.kubernetes.io/name: \(name)", "    app.kubernetes.io/part-of: menagerie"]
        let selector = ["  selector:", "    matchLabels:", "      app.kubernetes.io/name: \(name)"]
        var lines = comment(
            "Rendered by `compose/compose render kubernetes` from the services file's [\(name)]: edit that, then render"
                + " again (ComposeKitTests fail while this file differs from its rendering).")
        let podNames = (0..<pods).map { "\(name)-\($0)" }
        switch shape {
        case .deployment:
            lines += comment(
                "\(name): a Deployment of \(count(pods, "pod")). It has no volume (`volume`): its data directory is the pod's"
                    + " own (emptyDir) and dies with it, so what it keeps must be what every pod rebuilds at start, and"
                    + " any number of pods serve alike.")
        case .statefulSet:
            lines += comment(
                "\(name): a StatefulSet of one pod, for a stable name (\(name)-0, resolvable as"
                    + " \(name)-0.\(name).menagerie.svc through the headless Service) and a volume that outlives it"
                    + " (`volume`). One pod (`pods`): more, outside a cluster, would each keep a database of their own."
            )
        case .cluster:
            lines += comment(
                "\(name): a StatefulSet of \(pods) pods, each a member of one dqlite cluster (--cluster) that replicates"
                    + " \(name)'s database: a stable name per pod (\(podNames.joined(separator: ", ")), resolvable as"
                    + " \(name)-N.\(name)-cluster through the headless Service below, which publishes pods before they"
                    + " are ready, since a member must reach the others to become ready) and a volume per pod that"
                    + " outlives it (the Raft log). \(name)-0 bootstraps the cluster; every member is node N+1 of the"
                    + " list. Raft and statements go over mutual TLS with the pod's certificate (make-secrets gives it"
                    + " the *.\(name)-cluster names). More pods: raise `pods` and render again.")
        }
        lines += ["apiVersion: apps/v1", "kind: \(shape == .deployment ? "Deployment" : "StatefulSet")", "metadata:"]
        lines += ["  name: \(name)"] + labels + ["spec:"]
        switch shape {
        case .deployment: break
        case .statefulSet: lines.append("  serviceName: \(name)")
        case .cluster: lines.append("  serviceName: \(name)-cluster")
        }
        lines.append("  replicas: \(pods)")
        if shape == .cluster { lines.append("  podManagementPolicy: Parallel") }
        lines += selector
        if shape == .deployment {
            lines += [
                "  strategy:", "    type: RollingUpdate", "    rollingUpdate:", "      maxUnavailable: 0",
                "      maxSurge: 1",
            ]
        }
        lines += [
            "  template:", "    metadata:", "      labels:", "        app.kubernetes.io/name: \(name)",
            "        app.kubernetes.io/part-of: menagerie", "    spec:", "      securityContext:",
            "        runAsNonRoot: true", "        runAsUser: 10001", "        runAsGroup: 10001",
            "        fsGroup: 10001",
            "      terminationGracePeriodSeconds: 20", "      containers:", "        - name: \(name)",
            "          image: menagerie/\(name)",
        ]
        // The arguments as a flow sequence, a line of them per group, as a person would write them.
        var groups = [baseArguments(service), tlsArguments]
        if shape == .cluster {
            let members = podNames.map { "\($0).\(name)-cluster:\(raft)" }.joined(separator: ",")
            groups += [
                ["--cluster", members],
                ["--cluster-bind", "$(POD_NAME).\(name)-cluster:\(raft)", "--cluster-listen", "0.0.0.0:\(raft)"],
                ["--cluster-latency", String(clusterLatency)],
            ]
        }
        if !service.arguments.isEmpty { groups.append(service.arguments) }
        let argumentLines = groups.map { $0.map(yaml).joined(separator: ", ") }
        for (index, line) in argumentLines.enumerated() {
            let last = index == argumentLines.count - 1
            lines.append((index == 0 ? "          args: [" : "                 ") + line + (last ? "]" : ","))
        }
        lines.append("          env:")
        if shape == .cluster {
            lines += [
                "            - name: POD_NAME", "              valueFrom:", "                fieldRef:",
                "                  fieldPath: metadata.name",
            ]
        }
        lines += [
            "            - name: MENAGERIE_ADMIN_TOKEN", "              valueFrom:", "                secretKeyRef:",
            "                  name: menagerie-admin-token", "                  key: token", "          ports:",
            "            - name: rpc", "              containerPort: \(port)",
        ]
        if shape == .cluster { lines += ["            - name: raft", "              containerPort: \(raft)"] }
        lines += [
            "          resources:", "            requests:", "              cpu: \(quoted(resources.cpu))",
            "              memory: \(resources.memory)", "            limits:",
            "              memory: \(resources.memoryLimit)",
        ]
        let probe =
            "              command: [gateway, probe, \"127.0.0.1:\(port)\", --quiet, --timeout, \"2\", --tls-ca, /tls/ca.crt, --tls-cert, /tls/tls.crt, --tls-key, /tls/tls.key]"
        for (kind, period, failures) in [("startup", 2, 60), ("readiness", 5, 2), ("liveness", 10, 3)] {
            lines += [
                "          \(kind)Probe:", "            exec:", probe, "            periodSeconds: \(period)",
                "            timeoutSeconds: 3", "            failureThreshold: \(failures)",
            ]
        }
        lines += [
            "          volumeMounts:", "            - name: data", "              mountPath: /data",
            "            - name: tls",
            "              mountPath: /tls", "              readOnly: true", "      volumes:",
        ]
        if shape == .deployment { lines += ["        - name: data", "          emptyDir: {}"] }
        lines += ["        - name: tls", "          secret:", "            secretName: menagerie-tls-\(name)"]
        if let volume = service.volume {
            lines += [
                "  volumeClaimTemplates:", "    - metadata:", "        name: data", "      spec:",
                "        accessModes: [ReadWriteOnce]", "        resources:", "          requests:",
                "            storage: \(volume)",
            ]
        }
        if shape == .cluster {
            lines.append("---")
            lines += comment(
                "The cluster's members find each other here: headless, publishing pods before they are ready (a member"
                    + " becomes ready only once it has joined, for which it must reach the others), governing the"
                    + " StatefulSet's pod names.")
            lines += ["apiVersion: v1", "kind: Service", "metadata:", "  name: \(name)-cluster"] + labels
            lines += [
                "spec:", "  clusterIP: None", "  publishNotReadyAddresses: true", "  selector:",
                "    app.kubernetes.io/name: \(name)", "  ports:", "    - name: raft", "      port: \(raft)",
                "      targetPort: raft",
            ]
        }
        lines.append("---")
        lines += comment(
            "Headless: DNS answers with every ready pod's address, and the gateway round-robins over them itself.")
        lines += ["apiVersion: v1", "kind: Service", "metadata:", "  name: \(name)"] + labels
        lines += [
            "spec:", "  clusterIP: None", "  publishNotReadyAddresses: false", "  selector:",
            "    app.kubernetes.io/name: \(name)", "  ports:", "    - name: rpc", "      port: \(port)",
            "      targetPort: rpc",
        ]
        lines += ["---", "apiVersion: policy/v1", "kind: PodDisruptionBudget", "metadata:", "  name: \(name)"] + labels
        lines.append("spec:")
        switch shape {
        case .cluster:
            // A drain stops at the cluster's majority: Raft needs more than half of the members.
            let spare = max(1, (pods - 1) / 2)
            lines += comment(
                pods - spare > pods / 2
                    ? "\(spare == 1 ? "One pod" : "\(spare) pods") at a time may be drained: the other \(pods - spare) dqlite members keep a Raft majority."
                    : "One pod at a time may be drained, which stops the cluster until it is back: \(pods) members keep no Raft majority without one.",
                indent: "  ")
            lines.append("  maxUnavailable: \(spare)")
        case .deployment where pods > 1:
            lines += comment("One pod keeps serving while the others are drained.", indent: "  ")
            lines.append("  minAvailable: 1")
        default:
            lines += comment("Its one pod may be drained: the service is away until it is back.", indent: "  ")
            lines.append("  maxUnavailable: 1")
        }
        lines += selector
        return lines.joined(separator: "\n") + "\n"
    }

    /// The kustomization of `services`' manifests (`files`, their file names in the folder, in order): the namespace,
    /// their images and the Secrets make-secrets' files become (a certificate each, the gateway's, the admin token).
    public static func kustomization(_ services: [ServiceSettings], files: [String]) -> String {
        var lines = comment(
            "Rendered by `compose/compose render kubernetes` from the services file: edit that, then render again"
                + " (ComposeKitTests fail while this file differs from its rendering).")
        lines += comment(
            "Menagerie on Kubernetes: `deploy/kubernetes/make-secrets` (once: the CA, a certificate per service and the"
                + " admin token, in secrets/, which git ignores), then `kubectl apply -k deploy/kubernetes`. Images:"
                + " deploy/build-images builds menagerie/SERVICE; point `images` below at your registry. Checked offline"
                + " by deploy/validate-manifests (kubernetes-validate; rendered with `kubectl kustomize` where kubectl is"
                + " installed), which also holds this list to the folder's files.")
        lines += [
            "apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization", "namespace: menagerie", "resources:",
            "  - namespace.yaml",
        ]
        lines += files.map { "  - \($0)" }
        lines.append("images:")
        lines += services.flatMap { ["  - name: menagerie/\($0.name)", "    newTag: latest"] }
        lines += comment(
            "The stack's private CA, a certificate per service (and the gateway's, for operators and the probes'"
                + " peers), and the admin token: Secrets made from the files make-secrets writes.")
        lines += [
            "secretGenerator:", "  - name: menagerie-admin-token", "    files:", "      - token=secrets/admin-token",
        ]
        for name in services.map(\.name) + ["gateway"] {
            lines += [
                "  - name: menagerie-tls-\(name)", "    type: kubernetes.io/tls",
                "    files: [tls.crt=secrets/\(name).pem, tls.key=secrets/\(name).key, ca.crt=secrets/ca.pem]",
            ]
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The namespace every manifest goes into (the kustomization's `namespace`).
    public static let namespace = """
        apiVersion: v1
        kind: Namespace
        metadata:
          name: menagerie
          labels:
            app.kubernetes.io/part-of: menagerie

        """

    // MARK: The files

    /// What `compose render containers|kubernetes [--out DIR] [SERVICE…]` writes: each service's file where the services
    /// file's `container` or `kubernetes` names it (in DIR, by that name, with --out), every service that names one
    /// when none is given; and for Kubernetes the kustomization of all of them and the namespace, beside the manifests.
    public static func files(_ arguments: [String], of manifest: Manifest) throws(ComposeFailure) -> [(
        path: String, text: String
    )] {
        let usage = "usage: compose render containers|kubernetes [--out DIR] [SERVICE…]"
        var rest = arguments[...]
        guard let kind = rest.popFirst(), kind == "containers" || kind == "kubernetes" else {
            throw ComposeFailure(usage)
        }
        var out: String?, names: [String] = []
        while let argument = rest.popFirst() {
            if argument == "--out" {
                guard let directory = rest.popFirst(), !directory.isEmpty else { throw ComposeFailure(usage) }
                out = directory
            } else if argument.hasPrefix("--out=") {
                out = String(argument.dropFirst("--out=".count))
            } else if argument.hasPrefix("-") {
                throw ComposeFailure(usage)
            } else {
                names.append(argument)
            }
        }
        let key = kind == "containers" ? "container" : "kubernetes"
        func file(_ service: ServiceSettings) -> String? {
            kind == "containers" ? service.container : service.kubernetes
        }
        let deployed = manifest.services.filter { file($0) != nil }
        var selected: [ServiceSettings] = []
        for name in names {
            let service = try manifest.service(name)
            guard file(service) != nil else {
                throw ComposeFailure("[\(name)] names no \(key) file to render (\(key) = …)")
            }
            selected.append(service)
        }
        if names.isEmpty { selected = deployed }
        func path(_ service: ServiceSettings) -> String {
            let written = file(service)!
            guard let out else { return URL(fileURLWithPath: manifest.resolve(written)).standardizedFileURL.path }
            return URL(fileURLWithPath: out).appendingPathComponent(URL(fileURLWithPath: written).lastPathComponent)
                .path
        }
        var files: [(path: String, text: String)] = []
        for service in selected {
            files.append((path(service), kind == "containers" ? try containerfile(service) : try kubernetes(service)))
        }
        guard kind == "kubernetes", !deployed.isEmpty else { return files }
        // The kustomization lists every manifest by its name in one folder: theirs, or --out.
        let folders = Set(
            deployed.map { URL(fileURLWithPath: path($0)).deletingLastPathComponent().standardizedFileURL.path })
        guard folders.count == 1, let folder = folders.first else {
            throw ComposeFailure(
                "the kubernetes files are in several folders (\(folders.sorted().joined(separator: ", "))): the kustomization lists one folder's"
            )
        }
        let listed = deployed.map { URL(fileURLWithPath: path($0)).lastPathComponent }
        files.append((folder + "/kustomization.yaml", kustomization(deployed, files: listed)))
        files.append((folder + "/namespace.yaml", namespace))
        return files
    }

    // MARK: Text

    /// "one pod", "3 pods".
    static func count(_ number: Int, _ noun: String) -> String { number == 1 ? "one \(noun)" : "\(number) \(noun)s" }

    /// `text` as `#` comment lines of at most 118 columns, broken between words.
    static func comment(_ text: String, indent: String = "") -> [String] {
        let prefix = indent + "# "
        var lines: [String] = [], line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, prefix.count + line.count + 1 + word.count > 118 {
                lines.append(prefix + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(prefix + line) }
        return lines
    }

    /// A JSON string (the Containerfile's exec form, and a YAML double-quoted scalar alike).
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    /// An argument in a YAML flow sequence: plain where YAML reads it back as the same string (an option, a path),
    /// quoted otherwise (a number, an address, anything with YAML's special characters).
    static func yaml(_ text: String) -> String {
        let plain =
            !text.isEmpty && Int(text) == nil && text != "0.0.0.0"
            && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_/.".contains($0)) }
            && !["true", "false", "yes", "no", "null", "on", "off", "y", "n", "~"].contains(text.lowercased())
            && !text.hasPrefix(".") && Double(text) == nil
        return plain ? text : quoted(text)
    }
}
