//! URLs with credentials in them, as configuration files may hold them (a `base-url` with a
//! password): named without the password, and masked in a file's text.

/// The end of a URL's authority: the first `/`, `?`, `#`, whitespace or YAML flow character.
fn authority_end(rest: &str) -> usize {
    rest.find(|c: char| c.is_whitespace() || "/?#\"'`,]}".contains(c))
        .unwrap_or(rest.len())
}

/// `url` with the userinfo of its authority (`user:password@`) replaced by `***`, so that a
/// message can name the URL without echoing a password; unchanged when it has none.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority = &rest[..authority_end(rest)];
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// `text` with every URL's userinfo overwritten by `*`, byte for byte, so that spans into the
/// original text still fit: what diagnostics show of a configuration file, which may hold a
/// `base-url` with a password in it.
pub fn mask_url_credentials(text: &str) -> std::borrow::Cow<'_, str> {
    let mut masked: Option<Vec<u8>> = None;
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let start = from + found + 3;
        let rest = &text[start..];
        let authority = &rest[..authority_end(rest)];
        if let Some(at) = authority.rfind('@') {
            let bytes = masked.get_or_insert_with(|| text.as_bytes().to_vec());
            bytes[start..start + at].fill(b'*');
        }
        from = start;
    }
    match masked {
        // Only ASCII replaced whole characters' bytes (`*` for each), so it stays UTF-8.
        Some(bytes) => String::from_utf8(bytes)
            .map(std::borrow::Cow::Owned)
            .unwrap_or(std::borrow::Cow::Borrowed("")),
        None => std::borrow::Cow::Borrowed(text),
    }
}
