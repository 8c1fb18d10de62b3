import AccountLifecycle
import AccountStore
import AppleSignIn

/// Deletion receipts: the worker signs one for each completed purge when
/// SIWA_RECEIPT_KEY_FILE and SIWA_RECEIPT_ISSUER are both set, and none
/// when neither is; one without the other is a mistake that start-up names.
public struct ReceiptSettings: Sendable {
    public var keyFile: String
    public var issuer: String

    /// nil when receipts are off (neither setting given).
    public static func read(_ env: SettingsReader) throws -> ReceiptSettings? {
        typealias S = SettingsCatalog
        switch (env.string(S.receiptKeyFile), env.string(S.receiptIssuer)) {
        case (nil, nil):
            return nil
        case (let keyFile?, let issuer?):
            guard issuer.count <= 200, issuer.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
                throw SettingError(S.receiptIssuer.name, "expected printable text of at most 200 characters")
            }
            return ReceiptSettings(keyFile: keyFile, issuer: issuer)
        case (nil, _):
            throw SettingError(S.receiptKeyFile.name, "is required when SIWA_RECEIPT_ISSUER is set (receipts need both)")
        case (_, nil):
            throw SettingError(S.receiptIssuer.name, "is required when SIWA_RECEIPT_KEY_FILE is set (receipts need both)")
        }
    }

    /// Reads the key: a bad file is one line naming SIWA_RECEIPT_KEY_FILE.
    public func signer() throws -> DeletionReceiptSigner {
        do { return try DeletionReceiptSigner.load(keyFile: keyFile, issuer: issuer) } catch {
            throw SettingError(SettingsCatalog.receiptKeyFile.name, "\(error)")
        }
    }

    /// The same key, to sign the erasure ledger's lines; a bad file is one
    /// line naming SIWA_RECEIPT_KEY_FILE.
    public func ledgerSigner() throws -> ErasureLedgerSigner {
        do { return try ErasureLedgerSigner.load(keyFile: keyFile) } catch {
            throw SettingError(SettingsCatalog.receiptKeyFile.name, "\(error)")
        }
    }

    /// serve's SIWA_RECEIPT_JWKS_FILE, read; nil when unset. A bad file is
    /// one line naming the setting.
    public static func publishedKeys(_ env: SettingsReader) throws -> ES256KeySet? {
        guard let path = env.string(SettingsCatalog.receiptJWKSFile) else { return nil }
        do { return try ES256KeySet.load(path: path) } catch {
            throw SettingError(SettingsCatalog.receiptJWKSFile.name, "\(error)")
        }
    }
}
