//! Diagnostics: every finding of validation, with a stable code and labels on YAML nodes.
//!
//! A [`Diagnostic`] is plain data (serialisable, comparable); [`Diagnostic::to_miette`] turns it
//! into a [`miette::Diagnostic`] for graphical rendering. Labels may sit in several files (a vmid
//! collision points at both manifests): labels in the first label's file are rendered on its
//! source, the others as related diagnostics on theirs.

use crate::yaml::{Span, line_col};
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)*) => {
        /// The stable code of a diagnostic (`proxops::<name>`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Code {
            $($(#[$doc])* $variant,)*
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// Whether an error with this code is one PVE raises for a single resource's value:
            /// the resource still loads and is kept (never pruned), its cluster stays valid
            /// for planning, and the plan refuses that resource with the same code instead of
            /// sending it. (The compatibility examples carry such a placeholder SSH key.)
            pub fn refuses_only_its_resource(self) -> bool {
                matches!(self, Code::SshKey | Code::ReferenceUnresolvable)
            }

            /// The code as printed: `proxops::<name>`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $text,)*
                }
            }
        }
    };
}

codes! {
    /// The file is not well-formed YAML.
    YamlSyntax => "proxops::yaml_syntax",
    /// A manifest file holds more than one YAML document.
    MultipleDocuments => "proxops::multiple_documents",
    /// `apiVersion` is missing or not `proxops/v1alpha1`.
    ApiVersion => "proxops::api_version",
    /// `kind` is missing or not a registered kind.
    UnknownKind => "proxops::unknown_kind",
    /// A field that the schema does not know.
    UnknownField => "proxops::unknown_field",
    /// A required field is absent.
    MissingField => "proxops::missing_field",
    /// A value has the wrong type or breaks a rule of its field.
    InvalidValue => "proxops::invalid_value",
    /// `metadata.name` (or a cluster name) does not follow the naming rule.
    InvalidName => "proxops::invalid_name",
    /// A manifest sits directly under a kind root instead of `base/` or `<cluster>/`.
    FlatLayout => "proxops::flat_layout",
    /// A manifest's kind does not match the kind root it lives under.
    WrongKindRoot => "proxops::wrong_kind_root",
    /// A composition lists a file that is not under any kind root.
    NotUnderKindRoot => "proxops::not_under_kind_root",
    /// A cluster's `config.yaml` is missing, malformed, or does not declare exactly its own
    /// `pve.clusters.<name>` entry.
    ClusterConfig => "proxops::cluster_config",
    /// `proxops.yaml` cannot be read as a file.
    RepositoryConfig => "proxops::repository_config",
    /// A composition (`resources.yaml`) is missing or malformed, or lists a path twice, or one
    /// that is not a YAML file.
    Composition => "proxops::composition",
    /// A composition lists a file that does not exist.
    CompositionMissingFile => "proxops::composition_missing_file",
    /// A composition lists a path outside the repository.
    CompositionEscape => "proxops::composition_escape",
    /// A listed file (or a configuration file) is a FIFO, socket or device, not a regular file.
    NotRegularFile => "proxops::not_regular_file",
    /// Two manifests of one cluster share kind and name.
    DuplicateResource => "proxops::duplicate_resource",
    /// Two guests of one cluster claim the same vmid.
    VmidCollision => "proxops::vmid_collision",
    /// A reference names a resource the cluster's composition does not hold.
    UnknownReference => "proxops::unknown_reference",
    /// A referenced artifact is not placed on the node of the guest that uses it.
    ReferenceNotOnNode => "proxops::reference_not_on_node",
    /// A `proxops/depends-on` annotation is malformed.
    InvalidDependsOn => "proxops::invalid_depends_on",
    /// Resources depend on each other in a cycle.
    DependencyCycle => "proxops::dependency_cycle",
    /// A node outside the cluster's allowlist.
    NodeNotAllowed => "proxops::node_not_allowed",
    /// A manifest under a kind root that no cluster lists (warning).
    UnlistedManifest => "proxops::unlisted_manifest",
    /// A `proxops/` annotation with a value it does not take.
    InvalidAnnotation => "proxops::invalid_annotation",
    /// An unknown `proxops/` annotation (warning).
    UnknownAnnotation => "proxops::unknown_annotation",
    /// An SSH public key PVE would refuse (`validate_ssh_public_keys` runs `ssh-keygen -l`):
    /// an error that refuses only its resource (see [`Code::refuses_only_its_resource`]).
    SshKey => "proxops::ssh_key",
    /// A value of a field that PVE restricts to a list of spellings is not one of them.
    PveEnum => "proxops::pve_enum",
    /// An address or gateway of `ipconfigs` is of the wrong IP family for its key or NIC.
    IpFamily => "proxops::ip_family",
    /// A URL carries credentials (`user:password@`); they are never echoed.
    CredentialsInUrl => "proxops::credentials_in_url",
    /// A secret (a sink's URL or token) written in a configuration file instead of named: it
    /// comes from the environment, a file or SOPS; the value is never echoed.
    PlainSecret => "proxops::plain_secret",
    /// A file or directory could not be read.
    Io => "proxops::io",
    /// A `pve-config` key that a typed field manages; the help names the field.
    PveConfigTyped => "proxops::pve_config_typed",
    /// A `pve-config` key that is not a parameter of PVE's API for the guest type.
    PveConfigUnknown => "proxops::pve_config_unknown",
    /// A `pve-config` value that PVE's schema refuses (type, enum, range, pattern, format,
    /// property-string sub-keys).
    PveConfigValue => "proxops::pve_config_value",
    /// A config key ProxOps cannot set: PVE's API refuses it (raw `lxc.*` keys), only root@pam
    /// may set it and ProxOps leaves it alone (`args`), or PVE keeps it itself (`lock`,
    /// `unused[n]`, snapshot state).
    NotSettable => "proxops::not_settable",
    /// The retired `extra:` map: its keys move to `pve-config:` or a typed field.
    ExtraRetired => "proxops::extra_retired",
    /// A mapping with a `from*` expression key (`fromParameter`, `fromItem`, `fromArtifact`,
    /// ...) and another key beside it: an expression is a mapping with that one key only.
    ExpressionKeys => "proxops::expression_keys",
    /// A StackTemplate that is malformed in itself: a logical resource name used twice, a
    /// `dependsOn` naming no resource of the template, a bad parameter declaration.
    StackTemplate => "proxops::stack_template",
    /// A Stack names a StackTemplate the cluster's composition does not list.
    UnknownStackTemplate => "proxops::unknown_stack_template",
    /// A declared parameter without a default that a Stack does not supply.
    StackParameterMissing => "proxops::stack_parameter_missing",
    /// A parameter value (or default) of the wrong type for its declaration.
    StackParameterType => "proxops::stack_parameter_type",
    /// A Stack supplies a parameter its template does not declare, or a template expression
    /// reads one it does not declare.
    StackParameterUnknown => "proxops::stack_parameter_unknown",
    /// `forEach` over something that is not a list parameter, `fromItem` outside a `forEach`,
    /// an item without a `name`, or an item pointer that is not there.
    StackForEach => "proxops::stack_for_each",
    /// A Stack's `resources` subset names a resource its template does not have, or leaves out
    /// one that a chosen resource depends on.
    StackSubset => "proxops::stack_subset",
    /// A reference expression is malformed: an unknown or missing field, a value of the wrong
    /// type (another key beside it is `expression_keys`).
    ReferenceShape => "proxops::reference_shape",
    /// A reference expression's `pointer` is not an RFC 6901 JSON pointer.
    ReferencePointer => "proxops::reference_pointer",
    /// A reference expression's `resource` is not a `Kind/name` of a registered kind.
    ReferenceTarget => "proxops::reference_target",
    /// A reference expression where it cannot be used (`fromParameter`/`fromItem` outside a
    /// StackTemplate, `fromPromotion` outside a promotion).
    ReferenceContext => "proxops::reference_context",
    /// A reference expression stands for a PVE identity field or a field naming a resource.
    ReferenceField => "proxops::reference_field",
    /// A reference expression that can never resolve here: `fromPromotion` in a cluster with
    /// no promotion record. An error that refuses only its resource.
    ReferenceUnresolvable => "proxops::reference::unresolvable",
    /// A resource `proxops delete` marked is still listed by its cluster's composition (a
    /// warning: it stays deleted until the manifest leaves the composition).
    DeletedStillComposed => "proxops::delete::still_composed",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How serious a finding is: errors make a cluster invalid, warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Severity {
    /// The cluster cannot be reconciled.
    Error,
    /// Worth a look; does not block.
    Warning,
}

/// A file of the repository, kept whole so that labels can show their context.
#[derive(Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Path relative to the repository root, with `/` separators.
    pub path: String,
    /// The file's text.
    pub text: Arc<str>,
}

impl SourceFile {
    /// A source file from its repository-relative path and text.
    pub fn new(path: impl Into<String>, text: impl Into<Arc<str>>) -> Arc<SourceFile> {
        Arc::new(SourceFile {
            path: path.into(),
            text: text.into(),
        })
    }
}

/// A pointer into a file with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The file.
    pub file: Arc<SourceFile>,
    /// The bytes the label covers.
    pub span: Span,
    /// The text shown at the label.
    pub message: String,
}

impl Label {
    /// 1-based line and column of the label's start.
    pub fn line_col(&self) -> (usize, usize) {
        line_col(&self.file.text, self.span.start)
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The stable code.
    pub code: Code,
    /// One sentence saying what is wrong.
    pub message: String,
    /// The cluster it concerns; `None` for repository-wide findings.
    pub cluster: Option<String>,
    /// The file it concerns when there is no label to carry it.
    pub file: Option<String>,
    /// Where; the first label is the primary location.
    pub labels: Vec<Label>,
    /// How to fix it.
    pub help: Option<String>,
}

impl Diagnostic {
    /// An error with no location yet.
    pub fn error(code: Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            cluster: None,
            file: None,
            labels: Vec::new(),
            help: None,
        }
    }

    /// A warning with no location yet.
    pub fn warning(code: Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message)
        }
    }

    /// Adds a label.
    pub fn with_label(
        mut self,
        file: &Arc<SourceFile>,
        span: Span,
        message: impl Into<String>,
    ) -> Self {
        self.labels.push(Label {
            file: Arc::clone(file),
            span,
            message: message.into(),
        });
        self
    }

    /// Sets the help text.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Sets the help text if there is one.
    pub fn with_help_opt(mut self, help: Option<String>) -> Self {
        self.help = help;
        self
    }

    /// Sets the cluster.
    pub fn in_cluster(mut self, cluster: Option<&str>) -> Self {
        self.cluster = cluster.map(str::to_owned);
        self
    }

    /// Names the file the finding concerns (for findings without a label).
    pub fn in_file(mut self, path: impl Into<String>) -> Self {
        self.file = Some(path.into());
        self
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Whether this error makes its manifest unusable and its cluster invalid: every error but
    /// those that refuse only their resource ([`Code::refuses_only_its_resource`]).
    pub fn invalidates(&self) -> bool {
        self.is_error() && !self.code.refuses_only_its_resource()
    }

    /// The repository-relative path of the primary location, if any.
    pub fn primary_file(&self) -> Option<&str> {
        self.labels
            .first()
            .map(|l| l.file.path.as_str())
            .or(self.file.as_deref())
    }

    /// A key that orders diagnostics deterministically: by file, position, code, message.
    pub fn sort_key(&self) -> (Option<&str>, usize, Code, &str, Option<&str>) {
        (
            self.primary_file(),
            self.labels.first().map_or(0, |l| l.span.start),
            self.code,
            &self.message,
            self.cluster.as_deref(),
        )
    }

    /// A renderable miette diagnostic.
    pub fn to_miette(&self) -> MietteDiagnostic {
        let primary = self.labels.first().map(|l| Arc::clone(&l.file));
        let mut own = Vec::new();
        let mut related = Vec::new();
        for label in &self.labels {
            if primary
                .as_ref()
                .is_some_and(|p| Arc::ptr_eq(p, &label.file) || p.path == label.file.path)
            {
                own.push(label.clone());
            } else {
                related.push(MietteDiagnostic {
                    severity: miette::Severity::Advice,
                    code: None,
                    message: format!("see also {}", label.file.path),
                    source: Some(Arc::clone(&label.file)),
                    labels: vec![label.clone()],
                    help: None,
                    related: Vec::new(),
                });
            }
        }
        let message = self.message.clone();
        MietteDiagnostic {
            severity: match self.severity {
                Severity::Error => miette::Severity::Error,
                Severity::Warning => miette::Severity::Warning,
            },
            code: Some(self.code),
            message,
            source: primary,
            labels: own,
            help: self.help.clone(),
            related,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(label) = self.labels.first() {
            let (line, col) = label.line_col();
            write!(f, "{}:{line}:{col}: ", label.file.path)?;
        } else if let Some(file) = &self.file {
            write!(f, "{file}: ")?;
        }
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A [`Diagnostic`] in the shape miette renders.
#[derive(Debug)]
pub struct MietteDiagnostic {
    severity: miette::Severity,
    code: Option<Code>,
    message: String,
    source: Option<Arc<SourceFile>>,
    labels: Vec<Label>,
    help: Option<String>,
    related: Vec<MietteDiagnostic>,
}

impl fmt::Display for MietteDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MietteDiagnostic {}

impl miette::Diagnostic for MietteDiagnostic {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.code.map(|c| Box::new(c) as Box<dyn fmt::Display>)
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(self.severity)
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_deref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            return None;
        }
        Some(Box::new(self.labels.iter().enumerate().map(|(i, l)| {
            let text = (!l.message.is_empty()).then(|| l.message.clone());
            if i == 0 {
                miette::LabeledSpan::new_primary_with_span(text, l.span)
            } else {
                miette::LabeledSpan::new_with_span(text, l.span)
            }
        })))
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        if self.related.is_empty() {
            return None;
        }
        Some(Box::new(
            self.related.iter().map(|d| d as &dyn miette::Diagnostic),
        ))
    }
}

impl miette::SourceCode for SourceFile {
    fn read_span<'a>(
        &'a self,
        span: &miette::SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        let inner = self
            .text
            .read_span(span, context_lines_before, context_lines_after)?;
        Ok(Box::new(
            miette::MietteSpanContents::new_named(
                self.path.clone(),
                inner.data(),
                *inner.span(),
                inner.line(),
                inner.column(),
                inner.line_count(),
            )
            .with_language("yaml"),
        ))
    }
}

/// The closest candidate to `word`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
