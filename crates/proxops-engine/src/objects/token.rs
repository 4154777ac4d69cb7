//! An API token's create: PVE shows the token's secret once, in the create's answer
//! (pve-access-control `PVE/API2/User.pm` `generate_token`). The executor encrypts
//! `{full-tokenid, value}` at once with SOPS to the age recipients of the cluster's secrets file,
//! and only that document leaves it: into the action's result, and from there into the
//! receipt's artifact [`ARTIFACT`] on the observed plane; without the planes, into a SOPS
//! file under the repository the plan names. A create whose secret cannot be encrypted or
//! written deletes the token again: ProxOps never leaves a token whose secret is lost.

use super::request::ObjectRequest;
use proxops_pve::{Method, Params, PveClient, PveError};
use proxops_secrets::{Document, Secret, Value};
use serde::Serialize;
use std::path::Path;

/// The name of the receipt artifact holding a token's encrypted secret.
pub const ARTIFACT: &str = "secret";

/// The kind of that artifact.
pub const ARTIFACT_KIND: &str = "SopsSecret";

/// A token's secret, encrypted: what the create's result and the receipt carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SealedToken {
    /// `<userid>!<tokenid>`.
    pub full_tokenid: String,
    /// The age recipients it is encrypted to.
    pub recipients: Vec<String>,
    /// The SOPS document (YAML, every value encrypted) of `full-tokenid` and `value`: `sops -d`
    /// opens it with one of the recipients' identities.
    pub sops: String,
}

impl SealedToken {
    /// The receipt artifact's payload.
    pub fn payload(&self) -> serde_json::Value {
        serde_json::json!({
            "fullTokenid": self.full_tokenid,
            "recipients": self.recipients,
            "sops": self.sops,
        })
    }
}

/// Creates the token of `request` and returns its secret encrypted to `recipients`, first
/// written to `file` when there is one. When the answer holds no secret, or it cannot be
/// encrypted or written, the token is deleted again and the error says why (never the secret).
pub(crate) async fn create(
    client: &PveClient,
    request: &ObjectRequest,
    recipients: &[String],
    file: Option<&Path>,
) -> Result<SealedToken, PveError> {
    let mut answer = client
        .call_json_once(
            request.method.clone(),
            request.template,
            &request.path,
            &request.params,
        )
        .await?;
    let value = answer
        .get_mut("value")
        .map(serde_json::Value::take)
        .and_then(|v| match v {
            serde_json::Value::String(s) => Some(Secret::new(s)),
            _ => None,
        });
    let full = answer
        .get("full-tokenid")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    drop(answer);
    let sealed = match (value, full) {
        (Some(value), Some(full)) => seal(&full, value, recipients),
        _ => Err("PVE's answer holds no token value".to_owned()),
    };
    let sealed = match (sealed, file) {
        (Ok(s), Some(path)) => write_sealed(path, &s.sops).map(|()| s),
        (other, _) => other,
    };
    match sealed {
        Ok(s) => Ok(s),
        Err(why) => {
            let undone = client
                .call_json_once(
                    Method::DELETE,
                    request.template,
                    &request.path,
                    &Params::new(),
                )
                .await;
            let what = match undone {
                Ok(_) => "deleted it again".to_owned(),
                Err(e) => format!(
                    "could not delete it again ({e}): delete it by hand, ProxOps then makes it anew"
                ),
            };
            Err(PveError::Config(format!(
                "the API token was created but its secret could not be kept ({why}); ProxOps {what}"
            )))
        }
    }
}

/// Where a token's encrypted secret is written in the repository when no plane keeps it:
/// `clusters/<cluster>/tokens/<name>.sops.yaml`.
pub(crate) fn secret_file(cluster: &str, name: &str) -> std::path::PathBuf {
    Path::new("clusters")
        .join(cluster)
        .join("tokens")
        .join(format!("{name}.sops.yaml"))
}

/// Writes the encrypted document to `path` whole or not at all (a temporary file beside it,
/// renamed), creating its directory; an existing file (a token made anew) is replaced.
pub(crate) fn write_sealed(path: &Path, sops: &str) -> Result<(), String> {
    let fail = |what: &str, e: std::io::Error| format!("{what} {}: {e}", path.display());
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no directory", path.display()))?;
    std::fs::create_dir_all(dir).map_err(|e| fail("creating the directory of", e))?;
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, sops).map_err(|e| fail("writing", e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail("renaming into", e)
    })
}

/// `{full-tokenid, value}` as a SOPS document encrypted to `recipients`.
fn seal(full: &str, value: Secret, recipients: &[String]) -> Result<SealedToken, String> {
    let doc = Document::new(Value::Map(vec![
        ("full-tokenid".to_owned(), Value::Str(Secret::new(full))),
        ("value".to_owned(), Value::Str(value)),
    ]));
    let to: Vec<&str> = recipients.iter().map(String::as_str).collect();
    let now = proxops_store::documents::utc_timestamp(std::time::SystemTime::now());
    let sops = proxops_secrets::encrypt_document(&doc, &to, &now).map_err(|e| e.to_string())?;
    Ok(SealedToken {
        full_tokenid: full.to_owned(),
        recipients: recipients.to_vec(),
        sops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_with_the_recipients_identity_only() {
        let key = proxops_secrets::generate_identity();
        let sealed = seal(
            "ci@pve!deploy",
            Secret::new("0f0e0d0c-aaaa-bbbb-cccc-000000000001"),
            std::slice::from_ref(&key.recipient),
        )
        .unwrap();
        assert!(!sealed.sops.contains("0f0e0d0c"), "{}", sealed.sops);
        assert!(!sealed.payload().to_string().contains("0f0e0d0c"));
        let file = proxops_secrets::SopsFile::parse(&sealed.sops).unwrap();
        let ids = proxops_secrets::Identities::parse(key.identity.expose()).unwrap();
        let doc = file.decrypt(&ids).unwrap();
        let value = doc.get(&["value"]).and_then(Value::as_secret).unwrap();
        assert_eq!(value.expose(), "0f0e0d0c-aaaa-bbbb-cccc-000000000001");
        let other = proxops_secrets::generate_identity();
        let other = proxops_secrets::Identities::parse(other.identity.expose()).unwrap();
        assert!(file.decrypt(&other).is_err());
    }

    #[test]
    fn a_token_is_created_at_its_own_path_an_ip_set_entry_in_its_set() {
        use crate::objects::{FirewallPart, endpoints, firewall};
        use proxops_model::kinds::ObjectClass;
        let mut e = endpoints(ObjectClass::ApiToken, None);
        e.vars = vec![("userid", "ci@pve".to_owned())];
        assert!(e.creates_at_item());
        assert_eq!(e.list_path(), "/access/users/ci@pve/token");
        let mut d = crate::objects::DesiredObject::existing(ObjectClass::ApiToken, e, "deploy");
        d.params.insert(
            "comment".into(),
            crate::objects::ObjValue::One("[proxops.c.apitoken.deploy]".into()),
        );
        let r = crate::objects::create_request(&d);
        assert_eq!(r.path, "/access/users/ci@pve/token/deploy");
        assert!(r.params.pairs().iter().all(|(k, _)| k != "tokenid"));
        let entries = firewall(FirewallPart::IpSetEntries, &[("name", "admins".into())]);
        assert!(!entries.creates_at_item());
        assert!(!endpoints(ObjectClass::Pool, None).creates_at_item());
    }

    #[test]
    fn no_recipient_is_an_error_not_a_clear_secret() {
        let e = seal("ci@pve!deploy", Secret::new("s3cret-value"), &[]).unwrap_err();
        assert!(!e.contains("s3cret-value"), "{e}");
    }
}
