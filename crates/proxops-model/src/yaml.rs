//! A YAML document as a tree of [`Node`]s that remember where they came from.
//!
//! Manifests are parsed with the event parser that `serde-saphyr` ships (`granit_parser`) into this
//! tree rather than straight into typed structs: diagnostics need the exact span of any node (not
//! only of fields that happen to be wrapped), plain scalars must keep their source text (`discard: on`
//! is the string `on`, not YAML 1.1's `true`), and decoding must go on after the first problem so
//! that every problem of a file is reported at once. [`crate::de`] then decodes typed values out of
//! the tree with serde.

use serde_saphyr::granit_parser::{
    Event, Parser, ScalarStyle, ScanError, Span as ParserSpan, StructureStyle,
};
use std::collections::HashMap;
use std::sync::Arc;

/// A byte range in one source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
}

impl Span {
    /// A span from `start` (inclusive) to `end` (exclusive).
    pub fn new(start: usize, end: usize) -> Self {
        Span {
            start,
            end: end.max(start),
        }
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether the span covers no byte.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

impl From<Span> for miette::SourceSpan {
    fn from(s: Span) -> Self {
        miette::SourceSpan::new(s.start.into(), s.len())
    }
}

/// How a scalar was written: plain scalars are typed by their text (`42`, `true`, `null`), quoted
/// and block scalars are always strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarKind {
    /// An unquoted scalar.
    Plain,
    /// A single-quoted, double-quoted, literal or folded scalar (or one tagged `!!str`).
    Quoted,
}

/// The content of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    /// A scalar with its text after escape processing.
    Scalar(String, ScalarKind),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping in source order; keys are nodes too, so they can carry labels.
    Map(Vec<(Node, Node)>),
}

/// One YAML node and its span in the source.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where the node is written.
    pub span: Span,
    /// What it holds.
    pub value: NodeValue,
}

/// One step of a path into a document, used to find a node's span after decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathSeg {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

impl From<&str> for PathSeg {
    fn from(k: &str) -> Self {
        PathSeg::Key(k.to_owned())
    }
}

impl From<usize> for PathSeg {
    fn from(i: usize) -> Self {
        PathSeg::Index(i)
    }
}

impl Node {
    /// Whether this is a plain `null`, `~` or empty scalar.
    pub fn is_null(&self) -> bool {
        matches!(&self.value, NodeValue::Scalar(s, ScalarKind::Plain) if is_null_text(s))
    }

    /// The scalar text, if this is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Scalar(s, _) => Some(s),
            _ => None,
        }
    }

    /// The entries, if this is a mapping.
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            NodeValue::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The key node and value node of `key`, if this is a mapping holding it.
    pub fn entry(&self, key: &str) -> Option<(&Node, &Node)> {
        self.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(k, v)| (k, v))
    }

    /// The value of `key`, if this is a mapping holding it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The node at `path`, if every step exists.
    pub fn at(&self, path: &[PathSeg]) -> Option<&Node> {
        let mut node = self;
        for seg in path {
            node = match (seg, &node.value) {
                (PathSeg::Key(k), NodeValue::Map(_)) => node.get(k)?,
                (PathSeg::Index(i), NodeValue::Seq(items)) => items.get(*i)?,
                _ => return None,
            };
        }
        Some(node)
    }

    /// Where a label about `path` goes: the node itself if it exists; otherwise the key of the
    /// deepest existing node along the path (the field is missing there, and one line is a better
    /// label than a whole mapping), or that node's [`Node::head`] if it was reached by an index.
    pub fn span_at(&self, path: &[PathSeg]) -> Span {
        self.span_at_from(path, None)
    }

    /// [`Node::span_at`] for a node that is itself the value of the key at `key`.
    pub fn span_at_from(&self, path: &[PathSeg], key: Option<Span>) -> Span {
        match self.missing_step(path, key) {
            Some((span, _)) => span,
            None => self.at(path).map_or(self.span, |n| n.span),
        }
    }

    /// `None` if `path` exists; otherwise where its first missing step is labelled (as
    /// [`Node::span_at_from`] would) and that step's key.
    pub fn missing_step(&self, path: &[PathSeg], key: Option<Span>) -> Option<(Span, String)> {
        let mut node = self;
        let mut via_key = key;
        for seg in path {
            let next = match (seg, &node.value) {
                (PathSeg::Key(k), NodeValue::Map(_)) => {
                    node.entry(k).map(|(key, v)| (Some(key.span), v))
                }
                (PathSeg::Index(i), NodeValue::Seq(items)) => items.get(*i).map(|v| (None, v)),
                _ => None,
            };
            match next {
                Some((key, n)) => {
                    via_key = key;
                    node = n;
                }
                None => {
                    let name = match seg {
                        PathSeg::Key(k) => k.clone(),
                        PathSeg::Index(i) => i.to_string(),
                    };
                    return Some((via_key.unwrap_or_else(|| node.head()), name));
                }
            }
        }
        None
    }

    /// A short span that stands for the node: the first key of a non-empty mapping, else the
    /// whole node.
    pub fn head(&self) -> Span {
        match &self.value {
            NodeValue::Map(entries) => entries.first().map_or(self.span, |(k, _)| k.span),
            _ => self.span,
        }
    }

    /// A short word for the node's YAML type, for messages.
    pub fn type_word(&self) -> &'static str {
        match &self.value {
            NodeValue::Scalar(s, ScalarKind::Plain) if is_null_text(s) => "null",
            NodeValue::Scalar(_, _) => "a scalar",
            NodeValue::Seq(_) => "a sequence",
            NodeValue::Map(_) => "a mapping",
        }
    }
}

/// Whether plain scalar text means null in YAML 1.2's core schema.
pub(crate) fn is_null_text(s: &str) -> bool {
    matches!(s, "" | "~" | "null" | "Null" | "NULL")
}

/// A YAML syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// What the parser reported.
    pub message: String,
    /// Where (a zero-length or one-character span).
    pub span: Span,
}

/// The most YAML nodes one file may expand to through aliases: manifests are small, and the cap
/// stops an alias bomb from exhausting memory.
const MAX_NODES: usize = 100_000;

/// The deepest nesting accepted: far beyond any manifest, and well within the stack.
const MAX_DEPTH: usize = 128;

/// Parses every document of `source`. Empty documents are returned as a null scalar node so the
/// caller can decide to skip them.
pub fn parse_documents(source: &str) -> Result<Vec<Node>, SyntaxError> {
    let mut builder = TreeBuilder {
        source,
        char_to_byte: None,
        anchors: HashMap::new(),
        nodes: 0,
        depth: 0,
        last_end: Span::default(),
    };
    let mut events = Parser::new_from_str(source);
    let mut docs = Vec::new();
    while let Some(next) = events.next_event() {
        let (event, span) = next.map_err(|e| builder.scan_error(&e))?;
        match event {
            Event::DocumentStart(..) => {
                builder.anchors.clear();
                let doc = match builder.next_node(&mut events)? {
                    Some(node) => node,
                    None => Node {
                        span: builder.span(&span),
                        value: NodeValue::Scalar(String::new(), ScalarKind::Plain),
                    },
                };
                docs.push(doc);
            }
            Event::StreamEnd => break,
            _ => {}
        }
    }
    Ok(docs)
}

struct TreeBuilder<'s> {
    source: &'s str,
    /// Built lazily if the parser ever reports a marker without a byte offset.
    char_to_byte: Option<Arc<Vec<usize>>>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    depth: usize,
    /// The span of the last collection or document end event, which for a flow collection
    /// covers its closing bracket.
    last_end: Span,
}

type EventParser<'s> = Parser<'s, serde_saphyr::granit_parser::StrInput<'s>>;

impl<'s> TreeBuilder<'s> {
    fn byte_of(&mut self, marker: &serde_saphyr::granit_parser::Marker) -> usize {
        if let Some(b) = marker.byte_offset() {
            return b.min(self.source.len());
        }
        let table = self.char_to_byte.get_or_insert_with(|| {
            Arc::new(
                self.source
                    .char_indices()
                    .map(|(b, _)| b)
                    .chain(std::iter::once(self.source.len()))
                    .collect(),
            )
        });
        table
            .get(marker.index())
            .copied()
            .unwrap_or(self.source.len())
    }

    fn span(&mut self, s: &ParserSpan) -> Span {
        let start = self.byte_of(&s.start);
        let end = self.byte_of(&s.end);
        Span::new(start, end)
    }

    fn scan_error(&mut self, e: &ScanError) -> SyntaxError {
        let at = self.byte_of(e.marker());
        let end = self.source[at..]
            .chars()
            .next()
            .map_or(at, |c| at + c.len_utf8());
        SyntaxError {
            message: e.info(),
            span: Span::new(at, end),
        }
    }

    fn count(&mut self, span: Span, n: usize) -> Result<(), SyntaxError> {
        self.nodes += n;
        if self.nodes > MAX_NODES {
            return Err(SyntaxError {
                message: format!("document expands to more than {MAX_NODES} nodes (alias bomb?)"),
                span,
            });
        }
        Ok(())
    }

    fn enter(&mut self, span: Span) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(SyntaxError {
                message: format!("nesting deeper than {MAX_DEPTH} levels"),
                span,
            });
        }
        Ok(())
    }

    /// Reads one node; `None` at the end of a document or collection.
    fn next_node(&mut self, events: &mut EventParser<'s>) -> Result<Option<Node>, SyntaxError> {
        let Some(next) = events.next_event() else {
            return Ok(None);
        };
        let (event, pspan) = next.map_err(|e| self.scan_error(&e))?;
        let span = self.span(&pspan);
        let (node, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let tagged_str = tag.as_ref().is_some_and(|t| t.suffix() == "str");
                let kind = if style == ScalarStyle::Plain && !tagged_str {
                    ScalarKind::Plain
                } else {
                    ScalarKind::Quoted
                };
                self.count(span, 1)?;
                let node = Node {
                    span,
                    value: NodeValue::Scalar(text.into_owned(), kind),
                };
                (node, anchor)
            }
            Event::SequenceStart(style, anchor, _) => {
                self.count(span, 1)?;
                self.enter(span)?;
                let mut items = Vec::new();
                while let Some(item) = self.next_node(events)? {
                    items.push(item);
                }
                self.depth -= 1;
                let end = if style == StructureStyle::Flow {
                    self.last_end.end.max(span.end)
                } else {
                    items.last().map_or(span.end, |n| n.span.end.max(span.end))
                };
                let node = Node {
                    span: Span::new(span.start, end),
                    value: NodeValue::Seq({
                        items.shrink_to_fit();
                        items
                    }),
                };
                (node, anchor)
            }
            Event::MappingStart(style, anchor, _) => {
                self.count(span, 1)?;
                self.enter(span)?;
                let mut entries: Vec<(Node, Node)> = Vec::new();
                while let Some(key) = self.next_node(events)? {
                    let Some(value) = self.next_node(events)? else {
                        break;
                    };
                    if let Some(k) = key.as_str()
                        && entries.iter().any(|(seen, _)| seen.as_str() == Some(k))
                    {
                        return Err(SyntaxError {
                            message: format!("duplicate mapping key `{k}`"),
                            span: key.span,
                        });
                    }
                    entries.push((key, value));
                }
                self.depth -= 1;
                let end = if style == StructureStyle::Flow {
                    self.last_end.end.max(span.end)
                } else {
                    entries
                        .last()
                        .map_or(span.end, |(_, v)| v.span.end.max(span.end))
                };
                let node = Node {
                    span: Span::new(span.start, end),
                    value: NodeValue::Map({
                        entries.shrink_to_fit();
                        entries
                    }),
                };
                (node, anchor)
            }
            Event::Alias(id) => {
                let Some(target) = self.anchors.get(&id).cloned() else {
                    return Err(SyntaxError {
                        message: "alias refers to an unknown anchor".to_owned(),
                        span,
                    });
                };
                self.count(span, count_nodes(&target))?;
                // An alias pastes a whole subtree: it must respect the nesting limit too.
                if self.depth + nesting(&target) > MAX_DEPTH {
                    return Err(SyntaxError {
                        message: format!("alias expands to nesting deeper than {MAX_DEPTH} levels"),
                        span,
                    });
                }
                // The alias takes its target's content but keeps its own position.
                return Ok(Some(Node {
                    span,
                    value: target.value,
                }));
            }
            Event::SequenceEnd | Event::MappingEnd | Event::DocumentEnd | Event::StreamEnd => {
                self.last_end = span;
                return Ok(None);
            }
            _ => return self.next_node(events),
        };
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(Some(node))
    }
}

/// A compact, read-only copy of the shape of a [`Node`] tree: the span of every node, the text of
/// every mapping key and the position of every sequence item, but no scalar values.
/// [`crate::Resource`] keeps one per manifest, instead of the whole tree, to label findings after
/// decoding: [`SpanTree::span_at`] answers exactly as [`Node::span_at`] on the tree it was built
/// from, from about a quarter of the memory and in two allocations instead of one per node.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanTree(Shape);

#[derive(Debug, Clone, PartialEq)]
enum Shape {
    /// Items in one slice; the root is the first.
    Compact { items: Box<[Item]>, keys: Box<str> },
    /// Offsets that do not fit in 32 bits (a file beyond 4 GiB): the tree itself.
    Full(Box<Node>),
}

/// One node of a [`SpanTree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Item {
    start: u32,
    end: u32,
    /// `Key`: where its text starts in `keys`; `Seq` and `Map`: the index of the first child.
    a: u32,
    /// `Key`: the length of its text; `Seq`: the number of items; `Map`: the number of entries,
    /// stored as key, value, key, value... from `a` on.
    b: u32,
    tag: Tag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Tag {
    /// A scalar value, or a mapping key that is not a scalar (never matched by a path).
    #[default]
    Leaf,
    /// A scalar mapping key.
    Key,
    Seq,
    Map,
}

impl Item {
    fn span(&self) -> Span {
        Span::new(self.start as usize, self.end as usize)
    }

    /// The children as a range of item indices (a mapping's are key/value pairs).
    fn children(&self) -> std::ops::Range<usize> {
        let first = self.a as usize;
        let len = match self.tag {
            Tag::Seq => self.b as usize,
            Tag::Map => 2 * self.b as usize,
            Tag::Leaf | Tag::Key => 0,
        };
        first..first + len
    }
}

impl SpanTree {
    /// The shape of `root`. Recurses as deep as the tree (parsed trees are at most
    /// 128 levels deep).
    pub fn new(root: &Node) -> SpanTree {
        let mut size = Size::default();
        size.add(root, false);
        let fits = [size.items, size.key_bytes, size.offsets]
            .into_iter()
            .all(|n| u32::try_from(n).is_ok());
        if !fits {
            return SpanTree(Shape::Full(Box::new(root.clone())));
        }
        let mut builder = SpanTreeBuilder {
            items: vec![Item::default(); size.items],
            next: 1,
            keys: String::with_capacity(size.key_bytes),
        };
        builder.fill(root, 0, false);
        SpanTree(Shape::Compact {
            items: builder.items.into_boxed_slice(),
            keys: builder.keys.into_boxed_str(),
        })
    }

    /// The same as [`Node::span_at`] on the tree this was built from.
    pub fn span_at(&self, path: &[PathSeg]) -> Span {
        let (items, keys) = match &self.0 {
            Shape::Compact { items, keys } => (items, keys),
            Shape::Full(node) => return node.span_at(path),
        };
        let Some(mut node) = items.first() else {
            return Span::default();
        };
        let mut via_key = None;
        for seg in path {
            let next = match (seg, node.tag) {
                (PathSeg::Key(k), Tag::Map) => {
                    let mut found = None;
                    for pair in node.children().step_by(2) {
                        let (Some(key), Some(value)) = (items.get(pair), items.get(pair + 1))
                        else {
                            break;
                        };
                        let text = keys.get(key.a as usize..(key.a as usize + key.b as usize));
                        if key.tag == Tag::Key && text == Some(k.as_str()) {
                            found = Some((Some(key.span()), value));
                            break;
                        }
                    }
                    found
                }
                (PathSeg::Index(i), Tag::Seq) if *i < node.b as usize => {
                    items.get(node.a as usize + i).map(|v| (None, v))
                }
                _ => None,
            };
            match next {
                Some((key, n)) => {
                    via_key = key;
                    node = n;
                }
                None => {
                    // The deepest node's key, or its head (the first key of a mapping).
                    let head = match node.tag {
                        Tag::Map if node.b > 0 => items.get(node.a as usize).map(Item::span),
                        _ => None,
                    };
                    return via_key.or(head).unwrap_or_else(|| node.span());
                }
            }
        }
        node.span()
    }
}

/// What a [`SpanTree`] of a node needs.
#[derive(Default)]
struct Size {
    items: usize,
    key_bytes: usize,
    /// The largest span offset.
    offsets: usize,
}

impl Size {
    fn add(&mut self, node: &Node, is_key: bool) {
        self.items += 1;
        self.offsets = self.offsets.max(node.span.start).max(node.span.end);
        match &node.value {
            NodeValue::Scalar(text, _) if is_key => self.key_bytes += text.len(),
            NodeValue::Scalar(..) => {}
            _ if is_key => {}
            NodeValue::Seq(items) => {
                for item in items {
                    self.add(item, false);
                }
            }
            NodeValue::Map(entries) => {
                for (k, v) in entries {
                    self.add(k, true);
                    self.add(v, false);
                }
            }
        }
    }
}

/// Fills the items of a [`SpanTree`] whose [`Size`] was checked to fit in 32 bits, so the casts
/// below cannot truncate.
struct SpanTreeBuilder {
    items: Vec<Item>,
    /// The first item not yet given to a node.
    next: usize,
    keys: String,
}

impl SpanTreeBuilder {
    /// Writes `node` into the item at `slot`, and its children into the next free items.
    fn fill(&mut self, node: &Node, slot: usize, is_key: bool) {
        let mut item = Item {
            start: node.span.start as u32,
            end: node.span.end as u32,
            ..Item::default()
        };
        match &node.value {
            NodeValue::Scalar(text, _) if is_key => {
                item.tag = Tag::Key;
                item.a = self.keys.len() as u32;
                item.b = text.len() as u32;
                self.keys.push_str(text);
            }
            NodeValue::Scalar(..) => {}
            _ if is_key => {}
            NodeValue::Seq(children) => {
                let first = self.next;
                self.next += children.len();
                item.tag = Tag::Seq;
                item.a = first as u32;
                item.b = children.len() as u32;
                for (i, child) in children.iter().enumerate() {
                    self.fill(child, first + i, false);
                }
            }
            NodeValue::Map(entries) => {
                let first = self.next;
                self.next += 2 * entries.len();
                item.tag = Tag::Map;
                item.a = first as u32;
                item.b = entries.len() as u32;
                for (i, (k, v)) in entries.iter().enumerate() {
                    self.fill(k, first + 2 * i, true);
                    self.fill(v, first + 2 * i + 1, false);
                }
            }
        }
        if let Some(at) = self.items.get_mut(slot) {
            *at = item;
        }
    }
}

/// How many collections deep a node goes (a scalar is 0).
fn nesting(node: &Node) -> usize {
    match &node.value {
        NodeValue::Scalar(..) => 0,
        NodeValue::Seq(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
        NodeValue::Map(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| nesting(k).max(nesting(v)))
                .max()
                .unwrap_or(0)
        }
    }
}

fn count_nodes(node: &Node) -> usize {
    match &node.value {
        NodeValue::Scalar(..) => 1,
        NodeValue::Seq(items) => 1 + items.iter().map(count_nodes).sum::<usize>(),
        NodeValue::Map(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| count_nodes(k) + count_nodes(v))
                .sum::<usize>()
        }
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_plain_text_and_spans() {
        let src = "a: on\nb: 'x'\nc:\n  - 1\n";
        let docs = parse_documents(src).unwrap_or_default();
        assert_eq!(docs.len(), 1);
        let a = docs[0].get("a").map(|n| n.value.clone());
        assert_eq!(a, Some(NodeValue::Scalar("on".into(), ScalarKind::Plain)));
        let b = docs[0].get("b").map(|n| n.value.clone());
        assert_eq!(b, Some(NodeValue::Scalar("x".into(), ScalarKind::Quoted)));
        let item = docs[0].at(&["c".into(), 0.into()]).map(|n| n.span);
        assert_eq!(item.map(|s| &src[s.start..s.end]), Some("1"));
        assert_eq!(line_col(src, 20), (4, 5));
    }

    #[test]
    fn rejects_duplicate_keys_and_reports_position() {
        let err = parse_documents("a: 1\na: 2\n").err();
        assert_eq!(err.map(|e| e.span.start), Some(5));
        let err = parse_documents("a: [1, 2\n").err();
        assert!(err.is_some());
    }

    #[test]
    fn aliases_expand_and_bombs_stop() {
        let docs = parse_documents("a: &x [1, 2]\nb: *x\n").unwrap_or_default();
        assert_eq!(docs[0].get("b").map(|n| n.type_word()), Some("a sequence"));
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(parse_documents(&bomb).is_err());
    }

    #[test]
    fn flow_collections_span_their_brackets() {
        let src = "a: [1, 2]\nb: {x: 1}\n";
        let docs = parse_documents(src).unwrap_or_default();
        let text = |k: &str| docs[0].get(k).map(|n| &src[n.span.start..n.span.end]);
        assert_eq!(text("a"), Some("[1, 2]"));
        assert_eq!(text("b"), Some("{x: 1}"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000);
        assert!(parse_documents(&deep).is_err());
        let ok = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert!(parse_documents(&ok).is_ok());
    }

    #[test]
    fn multiple_and_empty_documents() {
        let docs = parse_documents("---\na: 1\n---\n---\nb: 2\n").unwrap_or_default();
        assert_eq!(docs.len(), 3);
        assert!(docs[1].is_null());
        assert_eq!(parse_documents("").map(|d| d.len()), Ok(0));
    }

    /// Every path that exists in `node`, plus, under each, a missing key and a missing index.
    fn paths(node: &Node, prefix: &mut Vec<PathSeg>, out: &mut Vec<Vec<PathSeg>>) {
        out.push(prefix.clone());
        for missing in [PathSeg::from("nope"), PathSeg::from(99)] {
            prefix.push(missing);
            out.push(prefix.clone());
            prefix.pop();
        }
        match &node.value {
            NodeValue::Scalar(..) => {}
            NodeValue::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    prefix.push(PathSeg::Index(i));
                    paths(item, prefix, out);
                    prefix.pop();
                }
            }
            NodeValue::Map(entries) => {
                for (k, v) in entries {
                    let key = match k.as_str() {
                        Some(text) => PathSeg::from(text),
                        None => PathSeg::from("[not a scalar]"),
                    };
                    prefix.push(key);
                    paths(v, prefix, out);
                    prefix.pop();
                }
            }
        }
    }

    #[test]
    fn span_tree_answers_like_the_tree() {
        let sources = [
            "a: 1\nb:\n  c: [x, {d: e}]\n  f:\n    - g: h\n      i: j\n    - []\n    - {}\n",
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\n  annotations:\n    proxops/depends-on: \"LXC:db\"\nspec:\n  node: n1\n  disks:\n    - size: 8GiB\n",
            "? [a, b]\n: 1\n? {c: d}\n: 2\n'quoted key': 3\n\"esc\\taped\": 4\nplain\n  folded: 5\n",
            "base: &b {x: 1, y: [2, 3]}\nuse: *b\nlist: &l [a, *b]\nagain: *l\n",
            "- 1\n- - 2\n  - 3\n- k: v\n",
            "scalar",
            "",
            "{}",
            "[]",
            "é: ü\nnested:\n  ü: [ä, ö]\n",
        ];
        for src in sources {
            let docs = parse_documents(src).unwrap_or_default();
            for doc in &docs {
                let tree = SpanTree::new(doc);
                assert!(matches!(tree.0, Shape::Compact { .. }));
                let mut all = Vec::new();
                paths(doc, &mut Vec::new(), &mut all);
                for path in &all {
                    assert_eq!(tree.span_at(path), doc.span_at(path), "{src:?} at {path:?}");
                }
            }
        }
    }

    #[test]
    fn span_tree_keeps_the_tree_when_offsets_do_not_fit() {
        let far = u32::MAX as usize + 10;
        let key = Node {
            span: Span::new(far, far + 1),
            value: NodeValue::Scalar("k".into(), ScalarKind::Plain),
        };
        let value = Node {
            span: Span::new(far + 3, far + 4),
            value: NodeValue::Scalar("v".into(), ScalarKind::Plain),
        };
        let doc = Node {
            span: Span::new(far, far + 4),
            value: NodeValue::Map(vec![(key, value)]),
        };
        let tree = SpanTree::new(&doc);
        assert!(matches!(tree.0, Shape::Full(_)));
        for path in [vec![], vec![PathSeg::from("k")], vec![PathSeg::from("x")]] {
            assert_eq!(tree.span_at(&path), doc.span_at(&path));
        }
    }
}
