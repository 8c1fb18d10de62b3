extension SettingsCatalog {
    /// `NAME_FILE` for each secret setting: the file its value may come
    /// from instead (`SecretValue`). Known names, never reported as typos.
    public static let fileVariables: Set<String> = Set(all.filter(\.secret).map { $0.name + "_FILE" })
}
