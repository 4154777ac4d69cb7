//! File uploads as pve-http-server `src/PVE/APIServer/AnyEvent.pm` reads them for
//! `POST /nodes/{node}/storage/{storage}/upload` (the one path pve-manager `PVE/HTTPServer.pm`
//! `auth_handler` marks `isUpload`): a `multipart/form-data` body whose form fields `content`,
//! `checksum-algorithm` and `checksum` come before the file part named `filename`; the file's
//! bytes go to a temporary file `/var/tmp/pveupload-<md5 hex>` that the handler gets as
//! `tmpfilename`. Other parts before the file are skipped, as `file_upload_multipart` skips them.

use std::collections::BTreeMap;

use crate::error::ApiError;

/// The uploaded file: the temporary file name the handler is given and its bytes.
#[derive(Debug, Clone)]
pub(crate) struct Upload {
    /// `/var/tmp/pveupload-<hex>`.
    pub tmpfilename: String,
    /// The file's content.
    pub data: Vec<u8>,
}

/// The boundary of a `multipart/form-data` content type, as `parse_content_type` splits it;
/// anything else is refused with `AnyEvent.pm`'s words.
pub(crate) fn boundary(ctype: &str) -> Result<String, ApiError> {
    let mut parts = ctype.split([';', ',']).map(str::trim);
    let ct = parts.next().unwrap_or("");
    let boundary = parts
        .find_map(|p| p.strip_prefix("boundary="))
        .map(|b| b.trim().trim_matches('"').to_string())
        .filter(|b| !b.is_empty());
    match boundary {
        Some(b) if ct == "multipart/form-data" => Ok(b),
        _ => Err(ApiError::fail(format!(
            "upload 'Content-Type '{ctype}' not implemented"
        ))),
    }
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// A part's headers: `Content-Disposition`'s type, `name` and `filename`.
struct Disposition {
    kind: String,
    name: String,
    filename: Option<String>,
}

fn disposition(headers: &str) -> Option<Disposition> {
    let line = headers.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-disposition")
            .then(|| v.trim().to_string())
    })?;
    let mut parts = line.split(';').map(str::trim);
    let kind = parts.next()?.to_string();
    let mut name = None;
    let mut filename = None;
    for p in parts {
        if let Some(v) = p.strip_prefix("name=") {
            name = Some(v.trim_matches('"').to_string());
        } else if let Some(v) = p.strip_prefix("filename=") {
            filename = Some(v.trim_matches('"').to_string());
        }
    }
    Some(Disposition {
        kind,
        name: name?,
        filename,
    })
}

/// Splits the body into its form fields and the file. `seq` makes the temporary name unique,
/// as `get_upload_filename` hashes a sequence number with the time and pid.
pub(crate) fn parse(
    body: &[u8],
    boundary: &str,
    seq: u64,
) -> Result<(BTreeMap<String, String>, Upload), ApiError> {
    let delim = format!("--{boundary}");
    let failed = || ApiError::fail("upload failed");
    let mut fields = BTreeMap::new();
    let mut pos = find(body, delim.as_bytes(), 0).ok_or_else(failed)?;
    loop {
        let start = pos + delim.len();
        if body[start..].starts_with(b"--") {
            // The closing delimiter before any file part.
            return Err(failed());
        }
        let head_end = find(body, b"\r\n\r\n", start)
            .map(|p| (p, p + 4))
            .or_else(|| find(body, b"\n\n", start).map(|p| (p, p + 2)))
            .ok_or_else(failed)?;
        let headers = String::from_utf8_lossy(&body[start..head_end.0]);
        let d = disposition(&headers).ok_or_else(failed)?;
        if d.kind != "form-data" {
            return Err(ApiError::fail(format!(
                "wrong Content-Disposition '{}' in multipart, expected 'form-data'",
                d.kind
            )));
        }
        let next = find(body, delim.as_bytes(), head_end.1).ok_or_else(failed)?;
        // The part's data ends before the line break that precedes the next delimiter.
        let mut end = next;
        if body[..end].ends_with(b"\r\n") {
            end -= 2;
        } else if body[..end].ends_with(b"\n") {
            end -= 1;
        }
        let data = &body[head_end.1..end.max(head_end.1)];
        if let Some(filename) = d.filename {
            if d.name != "filename" {
                return Err(ApiError::fail(format!(
                    "wrong field name '{}' for file upload, expected 'filename'",
                    d.name
                )));
            }
            fields.insert("filename".to_string(), filename.trim().to_string());
            let stamp = format!("{seq}{}{}", crate::auth::now(), std::process::id());
            let upload = Upload {
                tmpfilename: format!(
                    "/var/tmp/pveupload-{}",
                    crate::hashes::md5_hex(stamp.as_bytes())
                ),
                data: data.to_vec(),
            };
            return Ok((fields, upload));
        }
        if ["content", "checksum-algorithm", "checksum"].contains(&d.name.as_str()) {
            fields.insert(d.name, String::from_utf8_lossy(data).trim().to_string());
        }
        pos = next;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fields_before_the_file_and_the_file_bytes() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"a b.iso\"\r\n\
Content-Type: application/octet-stream\r\n\r\n\x00\x01\r\n\x02\r\n--XyZ--\r\n";
        let (fields, upload) = parse(body, "XyZ", 1).unwrap();
        assert_eq!(fields["content"], "iso");
        assert_eq!(fields["filename"], "a b.iso");
        assert_eq!(upload.data, b"\x00\x01\r\n\x02");
        assert!(upload.tmpfilename.starts_with("/var/tmp/pveupload-"));
    }

    #[test]
    fn refusals_in_pve_words() {
        let body = b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.iso\"\r\n\r\nx\r\n--B--";
        let err = parse(body, "B", 1).unwrap_err();
        assert!(err.text().contains("wrong field name 'file'"), "{err:?}");
        let err = boundary("application/x-www-form-urlencoded").unwrap_err();
        assert_eq!(
            err.text(),
            "upload 'Content-Type 'application/x-www-form-urlencoded' not implemented"
        );
        assert_eq!(
            boundary("multipart/form-data; boundary=abc").unwrap(),
            "abc"
        );
    }
}
