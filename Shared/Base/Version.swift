/// The version every Menagerie executable reports (health checks, `--version`).
public let menagerieVersion = "0.1.0"
