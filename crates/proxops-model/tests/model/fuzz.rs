//! Robustness: whatever the bytes of a repository's files, loading reports findings and never
//! panics, and every finding can be printed, rendered and serialised.
//!
//! The property tests run against an in-memory repository ([`MemSource`]) so that a case costs a
//! load, not a temporary directory. Their case counts are modest so the test binary stays fast;
//! set `PROPTEST_CASES` to run every property with more cases.

use crate::support::{artifact, example, lxc, shared, vm, with_spec};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config as ProptestConfig;
use proxops_model::quantity::{Quantity, QuantityError};
use proxops_model::report::ValidationReport;
use proxops_model::source::{DirEntry, ReadError, RepoSource};
use proxops_model::yaml::{Node, NodeValue, Span, parse_documents};
use proxops_model::{Code, LoadOptions, Registry, Repository, load_repository};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// An in-memory repository and the checks every load must pass.

/// A repository held in memory: repository-relative path -> bytes.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemSource {
    files: BTreeMap<String, Vec<u8>>,
}

impl MemSource {
    /// Adds (or replaces) a file.
    pub(crate) fn with(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> MemSource {
        self.set(path, bytes);
        self
    }

    /// Sets a file's bytes.
    pub(crate) fn set(&mut self, path: &str, bytes: impl Into<Vec<u8>>) {
        self.files.insert(path.to_owned(), bytes.into());
    }

    /// A file's bytes.
    pub(crate) fn get(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }

    /// Every file path, sorted.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// Every file under `root`, read recursively.
    pub(crate) fn from_dir(root: &Path) -> MemSource {
        let mut out = MemSource::default();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read_dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(root).expect("under root");
                    let rel = rel
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join("/");
                    out.set(&rel, std::fs::read(&path).expect("read"));
                }
            }
        }
        out
    }
}

impl RepoSource for MemSource {
    fn describe(&self) -> String {
        "an in-memory repository".to_owned()
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        if let Some(bytes) = self.files.get(path) {
            return Ok(bytes.clone());
        }
        let prefix = format!("{path}/");
        if self.files.keys().any(|p| p.starts_with(&prefix)) {
            return Err(ReadError::IsDirectory);
        }
        Err(ReadError::NotFound)
    }

    fn list(&self, dir: &str) -> std::io::Result<Vec<DirEntry>> {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        let mut out = BTreeSet::new();
        for path in self.files.keys() {
            if let Some(rest) = path.strip_prefix(&prefix) {
                out.insert(match rest.split_once('/') {
                    Some((d, _)) => DirEntry {
                        name: d.to_owned(),
                        is_dir: true,
                    },
                    None => DirEntry {
                        name: rest.to_owned(),
                        is_dir: false,
                    },
                });
            }
        }
        Ok(out.into_iter().collect())
    }
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::builtin)
}

/// Loads `source` with the built-in kinds and checks everything a caller does with the result.
pub(crate) fn load_checked(source: &MemSource) -> Repository {
    let repo = load_repository(source, registry(), &LoadOptions::default())
        .expect("listing an in-memory repository cannot fail");
    check_repository(&repo);
    repo
}

/// Every label lies inside its file on character boundaries, and every diagnostic can be
/// displayed, rendered by miette and serialised into the JSON report.
pub(crate) fn check_repository(repo: &Repository) {
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor());
    for d in &repo.diagnostics {
        for l in &d.labels {
            let text = &l.file.text;
            assert!(
                l.span.start <= l.span.end && l.span.end <= text.len(),
                "label {:?} outside {} ({} bytes): {d}",
                l.span,
                l.file.path,
                text.len()
            );
            assert!(
                text.is_char_boundary(l.span.start) && text.is_char_boundary(l.span.end),
                "label {:?} splits a character in {}: {d}",
                l.span,
                l.file.path
            );
        }
        let line = d.to_string();
        assert!(line.contains(d.code.as_str()), "{line}");
        let mut rendered = String::new();
        handler
            .render_report(&mut rendered, &d.to_miette())
            .unwrap_or_else(|e| panic!("cannot render {d}: {e}"));
    }
    serde_json::to_string(&ValidationReport::new(repo)).expect("report serialises");
    if repo.is_valid() {
        assert!(
            repo.clusters.iter().all(|c| c.valid),
            "a valid repository has an invalid cluster"
        );
    }
}

/// Whether some error (not warning) is about `path`.
fn has_error_in(repo: &Repository, path: &str) -> bool {
    repo.diagnostics
        .iter()
        .any(|d| d.is_error() && d.primary_file() == Some(path))
}

/// Every span of a parsed tree lies inside `source` on character boundaries.
fn check_spans(source: &str, docs: &[Node]) {
    let ok = |s: Span| {
        s.start <= s.end
            && s.end <= source.len()
            && source.is_char_boundary(s.start)
            && source.is_char_boundary(s.end)
    };
    let mut stack: Vec<&Node> = docs.iter().collect();
    while let Some(node) = stack.pop() {
        assert!(ok(node.span), "bad span {:?} in {source:?}", node.span);
        match &node.value {
            NodeValue::Scalar(..) => {}
            NodeValue::Seq(items) => stack.extend(items),
            NodeValue::Map(entries) => {
                for (k, v) in entries {
                    stack.push(k);
                    stack.push(v);
                }
            }
        }
    }
}

/// Property test configuration: `default` cases, unless `PROPTEST_CASES` asks for more.
pub(crate) fn cases(default: u32) -> ProptestConfig {
    let from_env = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok());
    ProptestConfig {
        cases: from_env.unwrap_or(default),
        ..ProptestConfig::default()
    }
}

/// A small deterministic pseudo-random byte stream (xorshift64*).
fn pseudo_random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

// ---------------------------------------------------------------------------------------------
// (a) Arbitrary bytes in each kind of file.

/// A small valid repository: cluster `c` with a VM using an ISO and an LXC using a CTTemplate.
fn base_repo() -> MemSource {
    let web = with_spec(
        &vm("web", "pve01", 100),
        &["hardware:", "  cdrom:", "    iso: installer"],
    );
    MemSource::default()
        .with("proxops.yaml", "log:\n  level: info\nreconcile:\n  poll-interval: 60s\n")
        .with(
            "clusters/c/config.yaml",
            "pve:\n  clusters:\n    c:\n      base-url: https://c.example.invalid:8006\n      nodes: [pve01, pve02]\n",
        )
        .with(
            "clusters/c/resources.yaml",
            "resources:\n  - ../../iso/base/installer.yaml\n  - ../../ctt/base/debian.yaml\n  - ../../vm/c/web.yaml\n  - ../../lxc/c/db.yaml\n",
        )
        .with("iso/base/installer.yaml", artifact("ISO", "installer", &["pve01"]))
        .with("ctt/base/debian.yaml", artifact("CTTemplate", "debian", &["pve02"]))
        .with("vm/c/web.yaml", web)
        .with("lxc/c/db.yaml", lxc("db", "pve02", 101, "debian"))
}

/// The files of [`base_repo`] the byte-level properties replace.
const TARGETS: &[&str] = &[
    "vm/c/web.yaml",
    "clusters/c/config.yaml",
    "clusters/c/resources.yaml",
    "proxops.yaml",
];

/// Pieces of YAML syntax and of ProxOps vocabulary, to build inputs that get past the parser.
const TOKENS: &[&str] = &[
    "\n",
    "\n",
    "\n",
    " ",
    "  ",
    "    ",
    "- ",
    "-",
    ": ",
    ":",
    "? ",
    ", ",
    "[",
    "]",
    "{",
    "}",
    "&a ",
    "*a",
    "&b ",
    "*b",
    "<<: ",
    "!!str ",
    "!!int ",
    "!!map ",
    "!local ",
    "'",
    "\"",
    "\\",
    "# comment\n",
    "#",
    "---\n",
    "--- ",
    "...\n",
    "|\n",
    "|-\n",
    ">\n",
    "%YAML 1.2\n",
    "%TAG !e! tag:e.com,2000:\n",
    "\t",
    "\r\n",
    "\r",
    "\u{feff}",
    "é",
    "\u{1f4a5}",
    "\u{0}",
    "\u{85}",
    "\u{2028}",
    "apiVersion: proxops/v1alpha1\n",
    "apiVersion",
    "kind: VM\n",
    "kind: ",
    "kind",
    "VM",
    "ISO",
    "LXC",
    "TemplateVM",
    "CTTemplate",
    "DiskImage",
    "metadata:\n",
    "metadata",
    "  name: web\n",
    "name",
    "spec:\n",
    "spec",
    "node",
    "nodes",
    "pve01",
    "vmid",
    "100",
    "0",
    "-1",
    "4294967296",
    "99999999999999999999",
    "1.5",
    "1e400",
    ".inf",
    ".nan",
    "~",
    "null",
    "true",
    "on",
    "memory",
    "1GiB",
    "99999999999PiB",
    "cpu",
    "type",
    "cores",
    "disks",
    "storage",
    "local-lvm",
    "size",
    "hardware",
    "cdrom",
    "iso",
    "installer",
    "template",
    "debian",
    "root",
    "pve:\n",
    "clusters:\n",
    "c:\n",
    "base-url: https://c.example.invalid:8006\n",
    "base-url",
    "https://[::1",
    "resources:\n",
    "resources",
    "../../vm/c/web.yaml",
    "../../../x.yaml",
    "/etc/passwd",
    "C:\\x.yaml",
    "vm/c/web.yml",
    "log:\n",
    "level",
    "reconcile:\n",
    "poll-interval",
    "60s",
    "1h30",
    "annotations:\n",
    "labels:\n",
    "proxops/depends-on: ",
    "ISO:installer",
    "VM:web",
    "LXC:",
    "extra",
    "tags",
];

/// Text built from [`TOKENS`].
fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..80).prop_map(|t| t.concat())
}

/// Arbitrary file contents: raw bytes (mostly not UTF-8), any Unicode, printable ASCII, tokens.
fn garbage() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..400),
        1 => any::<String>().prop_map(String::into_bytes),
        1 => "[ -~\t\n]{0,400}".prop_map(String::into_bytes),
        3 => token_soup().prop_map(String::into_bytes),
    ]
}

/// Replaces `target` of the base repository with `bytes`, loads, and checks the result.
fn load_with(target: &str, bytes: Vec<u8>) {
    let utf8 = std::str::from_utf8(&bytes).is_ok();
    let repo = load_checked(&base_repo().with(target, bytes));
    if !utf8 {
        assert!(has_error_in(&repo, target), "non-UTF-8 {target} accepted");
    }
}

#[test]
fn the_base_repository_is_valid() {
    let repo = load_checked(&base_repo());
    crate::support::assert_valid(&repo);
    assert_eq!(repo.clusters[0].resources.len(), 4);
    for target in TARGETS {
        assert!(base_repo().get(target).is_some(), "{target}");
    }
}

proptest! {
    #![proptest_config(cases(160))]

    #[test]
    fn arbitrary_bytes_as_a_listed_manifest(bytes in garbage()) {
        load_with("vm/c/web.yaml", bytes);
    }

    #[test]
    fn arbitrary_bytes_as_a_cluster_config(bytes in garbage()) {
        load_with("clusters/c/config.yaml", bytes);
    }

    #[test]
    fn arbitrary_bytes_as_a_composition(bytes in garbage()) {
        load_with("clusters/c/resources.yaml", bytes);
    }

    #[test]
    fn arbitrary_bytes_as_the_repository_config(bytes in garbage()) {
        load_with("proxops.yaml", bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// (b) Mutated example repositories.

/// A position in a collection of any size, as a fraction of it (like proptest's `Index`, but
/// constructible in tests).
#[derive(Debug, Clone, Copy)]
struct Pos(u64);

impl Pos {
    /// The position in a collection of `size` elements (`size` > 0).
    fn of(self, size: usize) -> usize {
        ((size as u128 * u128::from(self.0)) >> 64) as usize
    }
}

fn pos() -> impl Strategy<Value = Pos> {
    any::<u64>().prop_map(Pos)
}

/// One edit of a file.
#[derive(Debug, Clone)]
enum Mutation {
    /// Cut the file at a byte (possibly inside a character).
    Truncate(Pos),
    /// Remove a line.
    DeleteLine(Pos),
    /// Repeat a line.
    DuplicateLine(Pos),
    /// Exchange two lines.
    SwapLines(Pos, Pos),
    /// Replace the value after `: ` or `- ` on a line with other text.
    ReplaceScalar(Pos, String),
    /// Put whitespace at the start of a line.
    Indent(Pos, String),
    /// Anchor the value of a line (`key: &a value`).
    Anchor(Pos, &'static str),
    /// Make the value of a line an alias (`key: *a`).
    Alias(Pos, &'static str),
    /// Insert a merge key `<<: *a` with a line's indentation.
    MergeKey(Pos, &'static str),
    /// Insert a document marker before a line.
    DocumentMarker(Pos, &'static str),
    /// Insert bytes anywhere.
    InsertBytes(Pos, Vec<u8>),
}

/// Replacement text for a scalar.
fn scalar_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,24}",
        "[0-9]{1,24}[a-zA-Z]{0,3}",
        any::<String>(),
        token_soup(),
        prop::sample::select(
            &[
                "",
                "~",
                "null",
                "true",
                "yes",
                "on",
                "0",
                "-1",
                "+1",
                "0x10",
                "0o7",
                "1_000",
                "4294967296",
                "18446744073709551616",
                "1e309",
                "-.inf",
                ".nan",
                "''",
                "\"\"",
                "[]",
                "{}",
                "[a, b]",
                "{a: 1}",
                "|",
                ">",
                "&a",
                "*a",
                "*missing",
                "!!binary x",
                "!!str 1",
                "- x",
                "a: b",
                "#",
                "'unterminated",
                "\"bad \\q escape\"",
                "\t",
                "none",
                "..",
                "../../../../x.yaml",
                "/abs.yaml",
                "https://",
                "http://[::1]:99999",
            ][..]
        )
        .prop_map(str::to_owned),
    ]
}

fn anchor_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["a", "b", "x"][..])
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => pos().prop_map(Mutation::Truncate),
        1 => pos().prop_map(Mutation::DeleteLine),
        1 => pos().prop_map(Mutation::DuplicateLine),
        1 => (pos(), pos()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        3 => (pos(), scalar_text()).prop_map(|(i, t)| Mutation::ReplaceScalar(i, t)),
        1 => (pos(), "[ \t]{1,6}").prop_map(|(i, w)| Mutation::Indent(i, w)),
        1 => (pos(), anchor_name()).prop_map(|(i, a)| Mutation::Anchor(i, a)),
        1 => (pos(), anchor_name()).prop_map(|(i, a)| Mutation::Alias(i, a)),
        1 => (pos(), anchor_name()).prop_map(|(i, a)| Mutation::MergeKey(i, a)),
        1 => (pos(), prop::sample::select(&["---", "...", "--- x", "---\n---"][..]))
            .prop_map(|(i, m)| Mutation::DocumentMarker(i, m)),
        1 => (pos(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::InsertBytes(i, b)),
    ]
}

fn split_lines(text: &[u8]) -> Vec<Vec<u8>> {
    text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect()
}

fn join_lines(lines: &[Vec<u8>]) -> Vec<u8> {
    lines.join(&b'\n')
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Where the value of a line starts: after the first `: `, a trailing `:`, or a leading `- `.
fn value_start(line: &[u8]) -> Option<usize> {
    let indent = line.iter().take_while(|b| **b == b' ').count();
    if line[indent..].starts_with(b"- ") {
        return Some(indent + 2);
    }
    if let Some(at) = find(line, b": ") {
        return Some(at + 2);
    }
    line.ends_with(b":").then_some(line.len())
}

/// The lines that hold a value, or every line if none does.
fn value_lines(lines: &[Vec<u8>]) -> Vec<usize> {
    let found: Vec<usize> = (0..lines.len())
        .filter(|i| value_start(&lines[*i]).is_some())
        .collect();
    if found.is_empty() {
        (0..lines.len()).collect()
    } else {
        found
    }
}

fn apply(text: &mut Vec<u8>, m: &Mutation) {
    let mut lines = split_lines(text);
    let n = lines.len();
    let candidates = value_lines(&lines);
    let value_line = |i: &Pos| candidates[i.of(candidates.len())];
    match m {
        Mutation::Truncate(at) => {
            text.truncate(at.of(text.len() + 1));
            return;
        }
        Mutation::InsertBytes(at, bytes) => {
            let at = at.of(text.len() + 1);
            text.splice(at..at, bytes.iter().copied());
            return;
        }
        Mutation::DeleteLine(i) => {
            lines.remove(i.of(n));
        }
        Mutation::DuplicateLine(i) => {
            let i = i.of(n);
            lines.insert(i, lines[i].clone());
        }
        Mutation::SwapLines(a, b) => lines.swap(a.of(n), b.of(n)),
        Mutation::ReplaceScalar(i, new) => {
            let line = &mut lines[value_line(i)];
            let at = value_start(line).unwrap_or(line.len());
            line.truncate(at);
            line.extend_from_slice(new.as_bytes());
        }
        Mutation::Indent(i, ws) => {
            let i = i.of(n);
            lines[i].splice(0..0, ws.bytes());
        }
        Mutation::Anchor(i, name) => {
            let line = &mut lines[value_line(i)];
            let at = value_start(line).unwrap_or(0);
            let anchor = if at == line.len() {
                format!(" &{name}")
            } else {
                format!("&{name} ")
            };
            line.splice(at..at, anchor.bytes());
        }
        Mutation::Alias(i, name) => {
            let line = &mut lines[value_line(i)];
            let at = value_start(line).unwrap_or(line.len());
            line.truncate(at);
            if line.ends_with(b":") {
                line.push(b' ');
            }
            line.extend_from_slice(format!("*{name}").as_bytes());
        }
        Mutation::MergeKey(i, name) => {
            let i = i.of(n);
            let indent: Vec<u8> = lines[i]
                .iter()
                .take_while(|b| **b == b' ')
                .copied()
                .collect();
            let mut line = indent;
            line.extend_from_slice(format!("<<: *{name}").as_bytes());
            lines.insert(i, line);
        }
        Mutation::DocumentMarker(i, marker) => {
            lines.insert(i.of(n + 1), marker.as_bytes().to_vec());
        }
    }
    *text = join_lines(&lines);
}

/// An example repository loaded into memory, with the YAML files to mutate.
struct Corpus {
    name: &'static str,
    source: MemSource,
    yaml: Vec<String>,
}

/// The example repositories: the shared compatibility examples (when present) and homelab.
fn corpora() -> &'static [Corpus] {
    static CORPORA: OnceLock<Vec<Corpus>> = OnceLock::new();
    CORPORA.get_or_init(|| {
        let mut dirs = Vec::new();
        if let Some(compat) = shared("compat/examples") {
            dirs.push(("compat/examples", compat));
        }
        dirs.push(("examples/homelab", example("homelab")));
        dirs.into_iter()
            .map(|(name, dir)| {
                let source = MemSource::from_dir(&dir);
                let yaml = source
                    .paths()
                    .filter(|p| p.ends_with(".yaml") || p.ends_with(".yml"))
                    .map(str::to_owned)
                    .collect();
                Corpus { name, source, yaml }
            })
            .collect()
    })
}

/// Every (corpus, YAML file) pair.
fn corpus_files() -> Vec<(&'static Corpus, &'static str)> {
    corpora()
        .iter()
        .flat_map(|c| c.yaml.iter().map(move |f| (c, f.as_str())))
        .collect()
}

#[test]
fn the_example_repositories_load_without_errors() {
    for corpus in corpora() {
        let repo = load_checked(&corpus.source);
        // The compatibility examples' placeholder SSH key is an error that refuses only its VM.
        assert!(
            repo.diagnostics.iter().all(|d| !d.invalidates())
                && repo.clusters.iter().all(|c| c.valid),
            "{} has errors:\n{}",
            corpus.name,
            crate::support::dump(&repo)
        );
        assert!(
            corpus.yaml.len() >= 10,
            "{}: {:?}",
            corpus.name,
            corpus.yaml
        );
    }
}

#[test]
fn the_in_memory_source_loads_like_the_file_system() {
    // The properties run on MemSource; make sure it lists and reads like FsSource.
    let mut dirs = vec![example("homelab")];
    dirs.extend(shared("compat/examples"));
    let temp = crate::support::TempRepo::new();
    for path in base_repo().paths() {
        let text = String::from_utf8(base_repo().get(path).expect("file").to_vec()).expect("utf8");
        temp.write(path, &text);
    }
    dirs.push(temp.path().to_path_buf());
    for dir in dirs {
        let from_fs = crate::support::load_dir(&dir);
        let from_memory = load_checked(&MemSource::from_dir(&dir));
        assert_eq!(
            from_fs.diagnostics,
            from_memory.diagnostics,
            "{}",
            dir.display()
        );
        let keys = |r: &Repository| -> Vec<Vec<String>> {
            r.clusters
                .iter()
                .map(|c| c.resources.iter().map(|x| x.key().to_string()).collect())
                .collect()
        };
        assert_eq!(keys(&from_fs), keys(&from_memory), "{}", dir.display());
        assert!(!keys(&from_fs).concat().is_empty());
    }
}

#[test]
fn the_mutations_change_files() {
    // A sanity check of the mutator itself, so that the property below is not vacuous.
    let text = b"a:\n  b: 1\n  c:\n    - x\n".to_vec();
    let idx = |fraction: f64| Pos((fraction * u64::MAX as f64) as u64);
    let cases: Vec<(Mutation, &str)> = vec![
        (Mutation::Truncate(idx(0.45)), "a:\n  b: 1\n"),
        (Mutation::DeleteLine(idx(0.0)), "  b: 1\n  c:\n    - x\n"),
        (
            Mutation::ReplaceScalar(idx(0.0), "zz".into()),
            "a:zz\n  b: 1\n  c:\n    - x\n",
        ),
        (
            Mutation::Anchor(idx(0.3), "a"),
            "a:\n  b: &a 1\n  c:\n    - x\n",
        ),
        (
            Mutation::Alias(idx(0.6), "a"),
            "a:\n  b: 1\n  c: *a\n    - x\n",
        ),
        (
            Mutation::MergeKey(idx(0.3), "b"),
            "a:\n  <<: *b\n  b: 1\n  c:\n    - x\n",
        ),
        (
            Mutation::DocumentMarker(idx(0.0), "---"),
            "---\na:\n  b: 1\n  c:\n    - x\n",
        ),
    ];
    for (m, want) in cases {
        let mut t = text.clone();
        apply(&mut t, &m);
        assert_eq!(String::from_utf8_lossy(&t), want, "{m:?}");
    }
}

proptest! {
    #![proptest_config(cases(192))]

    #[test]
    fn mutated_example_repositories_load(
        file in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..5),
    ) {
        let files = corpus_files();
        let (corpus, path) = files[file.index(files.len())];
        let original = corpus.source.get(path).expect("listed").to_vec();
        let mut text = original.clone();
        for m in &mutations {
            apply(&mut text, m);
        }
        let unchanged = text == original;
        let utf8 = std::str::from_utf8(&text).is_ok();
        let mut source = corpus.source.clone();
        source.set(path, text);
        let repo = load_checked(&source);
        // An unchanged repository loads as it does untouched: the compatibility examples'
        // placeholder SSH key refuses only its VM, so the bar is "nothing invalidated".
        if unchanged {
            prop_assert!(
                repo.diagnostics.iter().all(|d| !d.invalidates())
                    && repo.clusters.iter().all(|c| c.valid),
                "{}",
                crate::support::dump(&repo)
            );
        }
        let read_by_loader = path == "proxops.yaml"
            || path.ends_with("/config.yaml")
            || path.ends_with("/resources.yaml");
        if !utf8 && read_by_loader {
            prop_assert!(has_error_in(&repo, path), "non-UTF-8 {path} accepted");
        }
        // Loading is deterministic.
        let again = load_repository(&source, registry(), &LoadOptions::default())
            .expect("listing an in-memory repository cannot fail");
        prop_assert_eq!(&repo.diagnostics, &again.diagnostics);
    }
}

// ---------------------------------------------------------------------------------------------
// (c) The YAML parser and the quantity parser on arbitrary text.

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn parse_documents_never_panics(text in prop_oneof![any::<String>(), token_soup()]) {
        match parse_documents(&text) {
            Ok(docs) => check_spans(&text, &docs),
            Err(e) => {
                prop_assert!(!e.message.is_empty());
                check_spans(&text, &[Node {
                    span: e.span,
                    value: NodeValue::Scalar(String::new(), proxops_model::yaml::ScalarKind::Plain),
                }]);
            }
        }
    }

    #[test]
    fn quantity_parse_never_panics(
        text in prop_oneof![
            any::<String>(),
            "[0-9]{0,24}[kKmMgGtTpPiIbB .\n-]{0,4}",
            "[+-]?[0-9_]{0,6}(\\.[0-9]{1,3})?[ ]?(KiB|MiB|GiB|TiB|PiB|EiB|KB|k|m|g|t|p|B|b|)",
        ],
    ) {
        match Quantity::parse(&text) {
            Ok(q) => {
                prop_assert_eq!(q.as_str(), text.as_str());
                prop_assert_eq!(q.to_string(), text.clone());
                let digits = text.bytes().take_while(u8::is_ascii_digit).count();
                prop_assert!(digits > 0, "{text:?} has no digits");
                let unit = text[digits..].to_ascii_lowercase();
                prop_assert!(
                    ["", "b", "k", "kb", "ki", "kib", "m", "mb", "mi", "mib", "g", "gb", "gi",
                     "gib", "t", "tb", "ti", "tib", "p", "pb", "pi", "pib"]
                        .contains(&unit.as_str()),
                    "{text:?} accepted with unit {unit:?}"
                );
                check_gib_string(&q)?;
                if let Some(mib) = q.whole_mib() {
                    prop_assert_eq!(mib.checked_mul(1 << 20), Some(q.bytes()));
                }
            }
            Err(QuantityError::Syntax(t) | QuantityError::Overflow(t) | QuantityError::Unit(t, _)) => {
                prop_assert_eq!(t, text);
            }
            Err(e) => prop_assert!(false, "{text:?}: an unexpected kind of error: {e}"),
        }
    }

    #[test]
    fn parse_duration_never_panics(text in prop_oneof![any::<String>(), "[0-9]{0,22}(ms|s|m|h|d|)( ?[0-9]{0,3}(ms|s|m|h|))?"]) {
        if let Some(d) = proxops_model::config::parse_duration(&text) {
            prop_assert!(!text.trim().is_empty());
            let _ = d.as_nanos();
        }
    }
}

/// `gib_string` is the exact decimal value of bytes / 2^30.
fn check_gib_string(q: &Quantity) -> Result<(), TestCaseError> {
    let s = q.gib_string();
    let (whole, frac) = s.split_once('.').unwrap_or((&s, ""));
    prop_assert!(frac.len() <= 30, "{s}");
    prop_assert!(
        whole.bytes().all(|b| b.is_ascii_digit()) && !whole.is_empty(),
        "{s}"
    );
    prop_assert!(frac.bytes().all(|b| b.is_ascii_digit()), "{s}");
    let gib: u64 = 1 << 30;
    prop_assert_eq!(whole.parse::<u64>().ok(), Some(q.bytes() / gib), "{}", s);
    // frac / 10^n == rem / 2^30  <=>  frac * 2^(30-n) == rem * 5^n  (n <= 30, fits in u128).
    let n = u32::try_from(frac.len()).unwrap_or(u32::MAX);
    let frac: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().unwrap_or(u128::MAX)
    };
    let rem = u128::from(q.bytes() % gib);
    prop_assert_eq!(frac << (30 - n), rem * 5u128.pow(n), "{}", s);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Fixed inputs: truncations, big files, deep nesting, alias bombs.

/// Every byte prefix of `manifest`, as the only file of a cluster, is either a valid manifest
/// or reported with an error in that file.
fn every_prefix(config: &[u8], manifest_path: &str, manifest: &[u8]) {
    let base = MemSource::default()
        .with("clusters/c/config.yaml", config.to_vec())
        .with(
            "clusters/c/resources.yaml",
            format!("resources:\n  - ../../{manifest_path}\n"),
        );
    let spec_at = find(manifest, b"\nspec:").expect("a spec") + 1;
    let mut valid = 0;
    for len in 0..=manifest.len() {
        let repo = load_checked(&base.clone().with(manifest_path, manifest[..len].to_vec()));
        if repo.is_valid() {
            valid += 1;
            assert!(
                len > spec_at,
                "a prefix of {len} bytes without spec is valid"
            );
        } else {
            assert!(
                has_error_in(&repo, manifest_path),
                "prefix of {len} bytes: errors elsewhere only:\n{}",
                crate::support::dump(&repo)
            );
        }
    }
    let full = load_checked(&base.with(manifest_path, manifest.to_vec()));
    crate::support::assert_valid(&full);
    assert!(valid >= 1);
}

fn cluster_config(name: &str, nodes: &[&str]) -> Vec<u8> {
    format!(
        "pve:\n  clusters:\n    {name}:\n      base-url: https://{name}.example.invalid:8006\n      nodes: [{}]\n",
        nodes.join(", ")
    )
    .into_bytes()
}

#[test]
fn every_prefix_of_a_homelab_manifest_is_reported() {
    let text = std::fs::read(example("homelab/vm/home/truenas.yaml")).expect("example");
    every_prefix(
        &cluster_config("c", &["pve1", "pve2"]),
        "vm/c/truenas.yaml",
        &text,
    );
}

#[test]
fn every_prefix_of_a_compat_manifest_is_reported() {
    // Holds non-ASCII text, so some prefixes end inside a character.
    let Some(path) = shared("compat/examples/lxc/example/cache-01.yaml") else {
        return;
    };
    let text = std::fs::read(path).expect("example");
    assert!(!text.is_ascii());
    let base = cluster_config("c", &["pve01"]);
    let ctt = artifact("CTTemplate", "golden-base", &["pve01"]);
    // The LXC needs its CTTemplate: list it too, then check the prefixes of the LXC.
    let mut source = MemSource::default()
        .with("clusters/c/config.yaml", base)
        .with(
            "clusters/c/resources.yaml",
            "resources:\n  - ../../ctt/base/golden-base.yaml\n  - ../../lxc/c/cache-01.yaml\n",
        )
        .with("ctt/base/golden-base.yaml", ctt);
    let spec_at = find(&text, b"\nspec:").expect("a spec") + 1;
    for len in 0..=text.len() {
        source.set("lxc/c/cache-01.yaml", text[..len].to_vec());
        let repo = load_checked(&source);
        if len <= spec_at {
            assert!(has_error_in(&repo, "lxc/c/cache-01.yaml"), "prefix {len}");
        }
        if std::str::from_utf8(&text[..len]).is_err() {
            assert!(has_error_in(&repo, "lxc/c/cache-01.yaml"), "prefix {len}");
        }
    }
    source.set("lxc/c/cache-01.yaml", text);
    crate::support::assert_valid(&load_checked(&source));
}

#[test]
fn a_megabyte_of_random_bytes_in_each_file() {
    let bytes = pseudo_random_bytes(1 << 20, 0x9e37_79b9_7f4a_7c15);
    for target in TARGETS {
        let repo = load_checked(&base_repo().with(target, bytes.clone()));
        let d = repo
            .diagnostics
            .iter()
            .find(|d| d.primary_file() == Some(*target))
            .unwrap_or_else(|| panic!("{target}: {}", crate::support::dump(&repo)));
        assert_eq!(d.code, Code::YamlSyntax, "{d}");
        assert!(d.message.contains("UTF-8"), "{d}");
    }
}

#[test]
fn a_megabyte_of_random_text_in_each_file() {
    // Printable ASCII with newlines and YAML indicators: the parser has to get through it.
    const ALPHABET: &[u8] = b"abcdefghij klmnop:-[]{}#&*!|>'\"%@`,?\n\n    ";
    let text: Vec<u8> = pseudo_random_bytes(1 << 20, 42)
        .into_iter()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()])
        .collect();
    for target in TARGETS {
        let repo = load_checked(&base_repo().with(target, text.clone()));
        assert!(has_error_in(&repo, target), "{target}");
    }
}

#[test]
fn a_megabyte_manifest_value_is_fine() {
    // A large but valid file: a one-megabyte comment and a long description.
    let mut manifest = format!("# {}\n", "x".repeat(1 << 20));
    manifest.push_str(&with_spec(
        &vm("web", "pve01", 100),
        &[&format!("pve-description: \"{}\"", "y".repeat(1 << 16))],
    ));
    let repo = load_checked(&base_repo().with("vm/c/web.yaml", manifest).with(
        "clusters/c/resources.yaml",
        "resources: [../../vm/c/web.yaml]\n",
    ));
    crate::support::assert_valid(&repo);
}

/// Nesting 10 000 levels deep, in the ways YAML allows.
fn deep_inputs() -> Vec<(&'static str, String)> {
    const N: usize = 10_000;
    vec![
        ("unclosed flow sequences", "[".repeat(N)),
        (
            "closed flow sequences",
            format!("{}{}", "[".repeat(N), "]".repeat(N)),
        ),
        (
            "flow mappings",
            format!("{}x{}", "{a: ".repeat(N), "}".repeat(N)),
        ),
        ("compact block sequences", format!("{}x\n", "- ".repeat(N))),
        (
            "block mappings",
            (0..N).map(|i| format!("{}k:\n", " ".repeat(i))).collect(),
        ),
        (
            "manifest with a deep label",
            format!(
                "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\n  labels:\n    a: {}\nspec: {{}}\n",
                "[".repeat(N) + &"]".repeat(N)
            ),
        ),
    ]
}

#[test]
fn deep_nesting_is_a_syntax_error_not_a_stack_overflow() {
    for (what, text) in deep_inputs() {
        let err = parse_documents(&text).expect_err(what);
        assert!(
            err.message.contains("nesting") || err.message.contains("recursion"),
            "{what}: {}",
            err.message
        );
        for target in TARGETS {
            let repo = load_checked(&base_repo().with(target, text.clone()));
            let d = repo
                .diagnostics
                .iter()
                .find(|d| d.primary_file() == Some(*target) && d.code == Code::YamlSyntax)
                .unwrap_or_else(|| panic!("{what} in {target}: {}", crate::support::dump(&repo)));
            assert!(d.is_error());
        }
    }
}

#[test]
fn nesting_up_to_the_limit_loads() {
    // 100 levels are within the limit: the manifest is reported only for the label's type.
    let deep = format!("{}x{}", "[".repeat(100), "]".repeat(100));
    let manifest = format!(
        "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata:\n  name: installer\n  labels:\n    a: {deep}\nspec: {{nodes: [pve01], storage: local, filename: i.iso, url: 'https://e.invalid/i.iso'}}\n"
    );
    let repo = load_checked(&base_repo().with("iso/base/installer.yaml", manifest));
    let d = crate::support::find(&repo, Code::InvalidValue);
    assert_eq!(d.primary_file(), Some("iso/base/installer.yaml"));
    assert!(d.message.contains("a sequence"), "{d}");
}

/// The classic "billion laughs": ten aliases per level, nine levels.
fn billion_laughs() -> String {
    let mut s = String::from("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..9 {
        let p = i - 1;
        let refs = vec![format!("*l{p}"); 10].join(", ");
        s.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
    }
    s
}

#[test]
fn an_alias_bomb_is_a_syntax_error() {
    let bomb = billion_laughs();
    let err = parse_documents(&bomb).expect_err("bomb");
    assert!(err.message.contains("alias bomb"), "{}", err.message);
    for target in TARGETS {
        let started = std::time::Instant::now();
        let repo = load_checked(&base_repo().with(target, bomb.clone()));
        let d = crate::support::find(&repo, Code::YamlSyntax);
        assert_eq!(d.primary_file(), Some(*target), "{d}");
        assert!(d.message.contains("alias bomb"), "{d}");
        assert!(
            started.elapsed().as_secs() < 5,
            "{target}: {:?}",
            started.elapsed()
        );
    }
    // A bomb inside a manifest's labels, after a valid envelope.
    let manifest = format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\n  labels:\n{}\nspec: {{}}\n",
        bomb.lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let repo = load_checked(&base_repo().with("vm/c/web.yaml", manifest));
    assert!(has_error_in(&repo, "vm/c/web.yaml"));
}

#[test]
fn aliases_within_the_node_budget_load() {
    // 10^4 expanded nodes: well under the cap, and no quadratic blow-up.
    let mut s = String::from("l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n");
    for i in 1..4 {
        let refs = vec![format!("*l{}", i - 1); 10].join(", ");
        s.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
    }
    let docs = parse_documents(&s).expect("within budget");
    check_spans(&s, &docs);
}

/// Anchors that wrap the previous anchor in `per` fresh levels: each level is within the nesting
/// limit as written, but the aliases expand to `levels * per` levels.
fn alias_tower(levels: usize, per: usize) -> String {
    let mut s = format!("a0: &a0 {}x{}\n", "[".repeat(per), "]".repeat(per));
    for i in 1..levels {
        s.push_str(&format!(
            "a{i}: &a{i} {}*a{}{}\n",
            "[".repeat(per),
            i - 1,
            "]".repeat(per)
        ));
    }
    s
}

#[test]
fn aliases_within_the_depth_limit_load() {
    // Two anchors of 60 levels each under a one-level mapping: 121 levels once expanded.
    let tower = alias_tower(2, 60);
    let docs = parse_documents(&tower).expect("within the limit");
    check_spans(&tower, &docs);
    let repo = load_checked(&base_repo().with("vm/c/web.yaml", tower));
    assert!(has_error_in(&repo, "vm/c/web.yaml"), "not a manifest");
    // Three of them expand to 181 levels.
    let err = parse_documents(&alias_tower(3, 60)).expect_err("past the limit");
    assert!(err.message.contains("nesting"), "{}", err.message);
}

/// Found by these tests: before aliases counted towards the nesting limit, this 3 KB input
/// expanded to 1440 levels and the recursive `Node::clone` of an anchored node overflowed a
/// 2 MiB thread stack in debug builds, aborting the process.
#[test]
fn aliases_cannot_nest_past_the_depth_limit() {
    let tower = alias_tower(12, 120);
    let outcome = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || parse_documents(&tower).map(|d| d.len()))
        .expect("spawn")
        .join()
        .expect("no panic");
    let err = outcome.expect_err("expanded nesting of 1440 levels must be refused");
    assert!(err.message.contains("nesting"), "{}", err.message);
}
