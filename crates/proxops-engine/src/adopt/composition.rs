//! Adding entries to a cluster's composition (`clusters/<c>/resources.yaml`) as YAML, not as
//! text appended at the end: the entries go into the `resources` list where it is, in its
//! style (a block list at its own indentation, a flow list inside its brackets), so comments
//! and layout stay. The result is parsed again and must list exactly the old entries and the
//! new ones; when it does not (a layout this editor does not follow), the composition is
//! rewritten canonically, which loses its comments, and the caller says so.

use proxops_model::yaml::{Node, NodeValue, parse_documents};

/// A composition with entries added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The new text.
    pub text: String,
    /// Whether it was rewritten canonically (comments and layout lost).
    pub rewritten: bool,
}

/// The entries of a composition's `resources` list, or why it is not one.
pub(crate) fn entries(text: &str) -> Result<Vec<String>, String> {
    let docs = parse_documents(text).map_err(|e| {
        let (line, column) = proxops_model::yaml::line_col(text, e.span.start);
        format!(
            "it is not YAML ({} at line {line}, column {column})",
            e.message
        )
    })?;
    let Some(list) = list_node(docs.first())? else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|item| {
            item.as_str()
                .map(|s| s.trim().to_owned())
                .ok_or_else(|| "an entry of `resources` is not a file path".to_owned())
        })
        .collect()
}

/// The `resources` list of a composition document: `None` when there is none yet.
fn list_node(doc: Option<&Node>) -> Result<Option<&[Node]>, String> {
    let Some(doc) = doc else { return Ok(None) };
    if doc.is_null() {
        return Ok(None);
    }
    match &doc.value {
        NodeValue::Seq(items) => Ok(Some(items)),
        NodeValue::Map(_) => match doc.get("resources") {
            None => Ok(None),
            Some(n) if n.is_null() => Ok(None),
            Some(Node {
                value: NodeValue::Seq(items),
                ..
            }) => Ok(Some(items)),
            Some(_) => Err("`resources` is not a list".to_owned()),
        },
        NodeValue::Scalar(..) => Err("the composition is not `resources:` and a list".to_owned()),
    }
}

/// `text` with `added` appended to its `resources` list.
pub fn add_entries(text: &str, added: &[String]) -> Result<Edited, String> {
    let before = entries(text)?;
    let want: Vec<String> = before.iter().chain(added).cloned().collect();
    if added.is_empty() {
        return Ok(Edited {
            text: text.to_owned(),
            rewritten: false,
        });
    }
    if let Some(edited) = edit_in_place(text, added)
        && entries(&edited).is_ok_and(|e| e == want)
    {
        return Ok(Edited {
            text: edited,
            rewritten: false,
        });
    }
    let mut canonical = String::from("resources:\n");
    for e in &want {
        canonical.push_str(&format!("  - {}\n", quoted(e)));
    }
    Ok(Edited {
        text: canonical,
        rewritten: true,
    })
}

/// A list entry as YAML: plain when it reads back the same, else double-quoted.
fn quoted(entry: &str) -> String {
    let plain = !entry.is_empty()
        && entry
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "./_-+~".contains(c))
        && !entry.starts_with(['-', '~']);
    if plain {
        entry.to_owned()
    } else {
        format!("{entry:?}")
    }
}

/// The edit that keeps the layout, when the list is one this follows.
fn edit_in_place(text: &str, added: &[String]) -> Option<String> {
    let docs = parse_documents(text).ok()?;
    let doc = docs.first();
    let items: Vec<String> = added.iter().map(|e| quoted(e)).collect();
    let list = match doc.map(|d| (&d.value, d.get("resources"))) {
        None => None,
        Some((NodeValue::Seq(_), _)) => doc,
        Some((NodeValue::Map(_), list)) => list,
        Some(_) => return None,
    };
    match list {
        // No list yet (no document, no key, or `resources:` with nothing): a block list after
        // the key, or a new key at the end.
        None => Some(append_key(text, &items)),
        Some(node) if node.is_null() => {
            let key_line_end = line_end(text, node.span.end.max(key_end(doc?)?));
            let mut out = text[..key_line_end].trim_end_matches('\n').to_owned();
            out.push('\n');
            for i in &items {
                out.push_str(&format!("  - {i}\n"));
            }
            out.push_str(&text[key_line_end..]);
            Some(out)
        }
        Some(node) => {
            let NodeValue::Seq(existing) = &node.value else {
                return None;
            };
            if text[node.span.start..].starts_with('[') {
                // A flow list: inside its brackets.
                let close = text[..node.span.end].rfind(']')?;
                let sep = if existing.is_empty() { "" } else { ", " };
                Some(format!(
                    "{}{sep}{}{}",
                    &text[..close],
                    items.join(", "),
                    &text[close..]
                ))
            } else {
                // A block list: after its last entry, at the indentation of its dashes.
                let first = existing.first()?;
                let line_start = text[..first.span.start].rfind('\n').map_or(0, |i| i + 1);
                let dash = text[line_start..first.span.start].find('-')? + line_start;
                let indent = &text[line_start..dash];
                if !indent.chars().all(|c| c == ' ') {
                    return None;
                }
                let at = line_end(text, existing.last()?.span.end);
                let mut out = text[..at].to_owned();
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&format!("{indent}# adopted by `proxops adopt`\n"));
                for i in &items {
                    out.push_str(&format!("{indent}- {i}\n"));
                }
                out.push_str(&text[at..]);
                Some(out)
            }
        }
    }
}

/// The end of the `resources` key of a mapping document.
fn key_end(doc: &Node) -> Option<usize> {
    doc.entry("resources").map(|(k, _)| k.span.end)
}

/// The offset after the newline ending the line that holds `offset` (or the text's end).
fn line_end(text: &str, offset: usize) -> usize {
    text[offset..]
        .find('\n')
        .map_or(text.len(), |i| offset + i + 1)
}

/// `text` with a `resources:` key holding `items` at its end.
fn append_key(text: &str, items: &[String]) -> String {
    let mut out = text.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("resources:\n");
    for i in items {
        out.push_str(&format!("  - {i}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(text: &str) -> Edited {
        add_entries(text, &["../../vm/lab/b.yaml".to_owned()]).unwrap()
    }

    #[test]
    fn each_layout_gains_the_entry_and_keeps_its_comments() {
        for (text, expect) in [
            (
                "resources:\n- ../../vm/lab/a.yaml\n",
                "resources:\n- ../../vm/lab/a.yaml\n# adopted by `proxops adopt`\n- ../../vm/lab/b.yaml\n",
            ),
            (
                "# lab\nresources:\n  - ../../vm/lab/a.yaml # web\n# end\n",
                "# lab\nresources:\n  - ../../vm/lab/a.yaml # web\n  # adopted by `proxops adopt`\n  - ../../vm/lab/b.yaml\n# end\n",
            ),
            (
                "resources: [../../vm/lab/a.yaml]\n",
                "resources: [../../vm/lab/a.yaml, ../../vm/lab/b.yaml]\n",
            ),
            ("resources: []\n", "resources: [../../vm/lab/b.yaml]\n"),
            (
                "resources:\n# none yet\n",
                "resources:\n  - ../../vm/lab/b.yaml\n# none yet\n",
            ),
            ("", "resources:\n  - ../../vm/lab/b.yaml\n"),
            (
                "# empty\n",
                "# empty\nresources:\n  - ../../vm/lab/b.yaml\n",
            ),
            (
                "- ../../vm/lab/a.yaml\n",
                "- ../../vm/lab/a.yaml\n# adopted by `proxops adopt`\n- ../../vm/lab/b.yaml\n",
            ),
            (
                "resources:\n  - ../../vm/lab/a.yaml",
                "resources:\n  - ../../vm/lab/a.yaml\n  # adopted by `proxops adopt`\n  - ../../vm/lab/b.yaml\n",
            ),
        ] {
            let edited = add(text);
            assert_eq!(edited.text, expect, "{text:?}");
            assert!(!edited.rewritten, "{text:?}");
        }
    }

    #[test]
    fn a_layout_it_cannot_follow_is_rewritten_canonically() {
        let edited = add("resources: [\n  ../../vm/lab/a.yaml,\n  ]\n");
        assert!(edited.rewritten);
        assert_eq!(
            entries(&edited.text).unwrap(),
            ["../../vm/lab/a.yaml", "../../vm/lab/b.yaml"]
        );
    }

    #[test]
    fn what_is_not_a_composition_is_refused() {
        assert!(add_entries("resources: web.yaml\n", &["b.yaml".to_owned()]).is_err());
        assert!(add_entries("resources: [a\n", &["b.yaml".to_owned()]).is_err());
        assert!(add_entries("resources:\n\t- a.yaml\n", &["b.yaml".to_owned()]).is_err());
    }
}
