//! The versioned JSON shape of a validation run (`kind: ValidationReport`).

use crate::diagnostic::{Diagnostic, Severity};
use crate::loader::Repository;
use serde::Serialize;

/// The report's `apiVersion`.
pub const REPORT_API_VERSION: &str = "proxops/v1alpha1";

/// `proxops validate --output json`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidationReport {
    /// Always `proxops/v1alpha1`.
    pub api_version: &'static str,
    /// Always `ValidationReport`.
    pub kind: &'static str,
    /// Per cluster: whether it is valid and how many resources it holds.
    pub clusters: Vec<ClusterSummary>,
    /// Every finding.
    pub diagnostics: Vec<DiagnosticRecord>,
}

/// One cluster's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterSummary {
    /// The cluster.
    pub name: String,
    /// No error.
    pub valid: bool,
    /// Resources of its composition that decoded without error.
    pub resources: usize,
}

/// One finding; paths are relative to the repository root, lines and columns 1-based.
#[derive(Debug, Clone, Serialize)]
pub struct DiagnosticRecord {
    /// `error` or `warning`.
    pub severity: Severity,
    /// `proxops::<name>`.
    pub code: String,
    /// What is wrong.
    pub message: String,
    /// The cluster, or null for repository-wide findings.
    pub cluster: Option<String>,
    /// The file, if any.
    pub file: Option<String>,
    /// Line of the primary label.
    pub line: Option<usize>,
    /// Column of the primary label.
    pub column: Option<usize>,
    /// Every label.
    pub labels: Vec<LabelRecord>,
    /// How to fix it.
    pub help: Option<String>,
}

/// One label of a finding.
#[derive(Debug, Clone, Serialize)]
pub struct LabelRecord {
    /// The file.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The label's text.
    pub message: String,
}

impl From<&Diagnostic> for DiagnosticRecord {
    fn from(d: &Diagnostic) -> Self {
        let labels: Vec<LabelRecord> = d
            .labels
            .iter()
            .map(|l| {
                let (line, column) = l.line_col();
                LabelRecord {
                    file: l.file.path.clone(),
                    line,
                    column,
                    message: l.message.clone(),
                }
            })
            .collect();
        DiagnosticRecord {
            severity: d.severity,
            code: d.code.as_str().to_owned(),
            message: d.message.clone(),
            cluster: d.cluster.clone(),
            file: d.primary_file().map(str::to_owned),
            line: labels.first().map(|l| l.line),
            column: labels.first().map(|l| l.column),
            labels,
            help: d.help.clone(),
        }
    }
}

impl ValidationReport {
    /// The report of a loaded repository.
    pub fn new(repo: &Repository) -> ValidationReport {
        ValidationReport {
            api_version: REPORT_API_VERSION,
            kind: "ValidationReport",
            clusters: repo
                .clusters
                .iter()
                .map(|c| ClusterSummary {
                    name: c.name.clone(),
                    valid: c.valid,
                    resources: c.resources.len(),
                })
                .collect(),
            diagnostics: repo
                .diagnostics
                .iter()
                .map(DiagnosticRecord::from)
                .collect(),
        }
    }
}
