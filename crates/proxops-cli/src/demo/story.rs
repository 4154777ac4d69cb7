//! The demo's steps, in order (see the module doc of [`super`]).

use super::workspace::Workspace;
use super::{
    ClusterApplied, DemoError, DemoEvent, DemoOptions, DemoReport, Drifted, Listed, Pruned,
};
use proxops_engine::backend::{Backend, connect};
use proxops_engine::desired::identity_tag;
use proxops_engine::plan::Verb;
use proxops_engine::planes::{ResourceItem, Selector, resource_items};
use proxops_engine::reconcile::{
    ClusterRun, Event, ReconcileOptions, Reconciler, RunResult, Source,
};
use proxops_engine::verify::{ClusterVerification, VerifyOptions, VerifyState, verify_cluster};
// The demo repository loaded at its `HEAD` (not the demo's own `Workspace`, a copy on disk).
use proxops_engine::workspace::Workspace as Head;
use proxops_model::Registry;
use proxops_model::config::DriftMode;
use proxops_pve::{ConfigChange, GuestRef};
use proxops_pve_sim::State;
use proxops_store::{PlaneRefs, ResourceState, Store};
use std::collections::BTreeMap;
use std::sync::Arc;

mod firewall;
mod guarded;

/// Runs the demo (see [`super`]).
pub async fn run(options: &DemoOptions) -> Result<DemoReport, DemoError> {
    let ws = Workspace::create(&options.source, options.parent.as_deref(), options.keep)?;
    let story = Story {
        ws: &ws,
        options,
        registry: Arc::new(Registry::builtin()),
        store: Store::open(&ws.repo)?,
    };
    story.tell().await
}

struct Story<'a> {
    ws: &'a Workspace,
    options: &'a DemoOptions,
    registry: Arc<Registry>,
    store: Store,
}

impl Story<'_> {
    fn emit(&self, event: &DemoEvent<'_>) {
        if let Some(f) = &self.options.events {
            f(event);
        }
    }

    fn step(&self, number: usize, title: &str) {
        self.emit(&DemoEvent::Step { number, title });
    }

    fn note(&self, text: &str) {
        self.emit(&DemoEvent::Note(text));
    }

    async fn tell(&self) -> Result<DemoReport, DemoError> {
        let head = self.head()?;
        let names: Vec<String> = head.graphs().iter().map(|(n, _)| n.clone()).collect();
        let Some(focus) = names.last().cloned() else {
            return Err(DemoError::Repository(
                "the repository has no valid cluster".into(),
            ));
        };
        self.step(1, "plan and apply every cluster, then plan again");
        let mut clusters = Vec::new();
        for name in &names {
            clusters.push(self.apply(&head, name).await?);
        }
        self.step(2, &format!("proxops get --cluster {focus}"));
        let get = self.list(&focus)?;
        self.step(3, "a change by hand in PVE, found as drift and restored");
        let drift = self.drift(&head, &focus).await?;
        let mut number = 4;
        let firewall = match self.firewall_cluster(&names)? {
            Some((cluster, subject, group)) => {
                self.step(
                    number,
                    "a firewall rule changed by hand: found as drift and restored, a rule added by hand kept",
                );
                number += 1;
                Some(self.firewall_drift(&cluster, &subject, &group).await?)
            }
            None => None,
        };
        self.step(
            number,
            "a manifest removed from the composition: pruned, and recorded",
        );
        let prune = self.prune(&head, &focus, &drift.subject).await?;
        self.step(
            number + 1,
            "a disruptive update guarded by a snapshot: the guest does not come back, rolled back",
        );
        let guarded = self.guarded_update(&focus).await?;
        self.step(number + 2, "where to look next");
        let next = self.next(&focus);
        for line in &next {
            self.note(line);
        }
        Ok(DemoReport {
            repository: self.ws.repo.clone(),
            kept: self.ws.kept(),
            clusters,
            get,
            drift,
            firewall,
            prune,
            guarded,
            next,
        })
    }

    /// The demo repository at its `HEAD`.
    fn head(&self) -> Result<Head, DemoError> {
        let source = self.store.source(None)?;
        Head::at_commit(&source, &self.ws.repo, Arc::clone(&self.registry), &[])
            .map_err(|e| DemoError::Repository(e.to_string()))
    }

    fn reconciler(&self, cluster: &str) -> Reconciler {
        let events = self.options.events.clone();
        let progress = self.options.events.clone();
        let name = cluster.to_owned();
        let mut options = ReconcileOptions::default()
            .with_holder("demo")
            .with_drift(Some(DriftMode::Correct));
        if let Some(f) = events {
            options = options.with_events(Arc::new(move |e: &Event<'_>| {
                f(&DemoEvent::Reconcile(e));
            }));
        }
        if let Some(f) = progress {
            options = options.with_progress(Arc::new(move |p| {
                f(&DemoEvent::Progress {
                    cluster: &name,
                    progress: p,
                });
            }));
        }
        let backend = Backend::Sim {
            state_file: Some(self.ws.sim_state(cluster)),
            task_time: self.options.task_time,
        };
        Reconciler::builder(Arc::clone(&self.registry), backend)
            .store(self.store.clone())
            .record_planes(true)
            .options(options)
            .build()
    }

    async fn cycle(&self, head: &Head, cluster: &str) -> ClusterRun {
        let (_stop_tx, stop) = tokio::sync::watch::channel(false);
        let source =
            Source::new(head.repo(), head.graph(cluster), &self.ws.repo).at(head.revision());
        self.reconciler(cluster).cycle(source, cluster, stop).await
    }

    fn sim_state(&self, cluster: &str) -> Result<State, DemoError> {
        State::load(&self.ws.sim_state(cluster)).map_err(|e| DemoError::Simulator(e.to_string()))
    }

    async fn apply(&self, head: &Head, cluster: &str) -> Result<ClusterApplied, DemoError> {
        if let Some(c) = head.repo().cluster(cluster) {
            let nodes = c
                .entry
                .as_ref()
                .map(|e| e.nodes.join(", "))
                .unwrap_or_default();
            let version = proxops_engine::backend::sim_version(
                c,
                &proxops_engine::backend::SimSeed::default(),
            );
            self.note(&format!(
                "cluster {cluster}: a simulated PVE {version}, nodes {nodes}"
            ));
        }
        let first = self.cycle(head, cluster).await;
        failed_run(&first)?;
        let tasks = self.sim_state(cluster)?.tasks.len();
        let again = self.cycle(head, cluster).await;
        failed_run(&again)?;
        let state = self.sim_state(cluster)?;
        let mut by_type = BTreeMap::new();
        let mut by_target: BTreeMap<(&str, &str, &str), usize> = BTreeMap::new();
        for t in &state.tasks[..tasks.min(state.tasks.len())] {
            *by_type.entry(t.kind.clone()).or_insert(0) += 1;
            // A clone task's id is its source (PVE's UPID names the template), so several
            // clones of one template are not a repetition.
            if !t.kind.ends_with("clone") {
                *by_target.entry((&t.node, &t.kind, &t.id)).or_insert(0) += 1;
            }
        }
        let repeated = by_target
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|((node, kind, id), n)| format!("{kind} {id} on {node} x{n}"))
            .collect();
        let report = first.cycles.first().and_then(|c| c.report.as_ref());
        let count = |pred: fn(&proxops_engine::execute::Outcome) -> bool| {
            report.map_or(0, |r| r.count(pred))
        };
        Ok(ClusterApplied {
            cluster: cluster.to_owned(),
            result: first.result,
            plan: first.last_plan().cloned(),
            succeeded: count(|o| *o == proxops_engine::execute::Outcome::Succeeded),
            failed: count(|o| matches!(o, proxops_engine::execute::Outcome::Failed { .. })),
            tasks: by_type,
            repeated,
            again: again.result,
            tasks_again: state.tasks.len().saturating_sub(tasks),
            receipts: first
                .cycles
                .iter()
                .filter_map(|c| c.receipts.as_ref())
                .map(|r| r.receipts)
                .sum(),
        })
    }

    fn refs(&self, head: &Head, cluster: &str) -> Result<PlaneRefs, DemoError> {
        let entry = head.repo().cluster(cluster).and_then(|c| c.entry.as_ref());
        Ok(PlaneRefs::from_config(cluster, entry)?)
    }

    fn items(&self, cluster: &str) -> Result<Vec<ResourceItem>, DemoError> {
        let head = self.head()?;
        let view = self.store.view(&self.refs(&head, cluster)?)?;
        Ok(resource_items(&view, &Selector::parse(None)))
    }

    fn list(&self, cluster: &str) -> Result<Listed, DemoError> {
        let items = self.items(cluster)?;
        self.emit(&DemoEvent::Resources(&items));
        Ok(Listed {
            cluster: cluster.to_owned(),
            clean: items
                .iter()
                .filter(|i| i.state == ResourceState::Clean)
                .count(),
            items,
        })
    }

    /// Changes a stopped VM's memory and removes one of its tags through the PVE API, as an
    /// operator would in the web UI; then one cycle.
    async fn drift(&self, head: &Head, cluster: &str) -> Result<Drifted, DemoError> {
        let state = self.sim_state(cluster)?;
        let tag_prefix = format!("{}{cluster}.vm.", proxops_engine::desired::IDENTITY_PREFIX);
        let Some((vmid, guest, name)) = state.guests.iter().find_map(|(vmid, g)| {
            let name = g
                .config
                .get("tags")?
                .split(';')
                .find_map(|t| t.strip_prefix(&tag_prefix))?
                .to_owned();
            let plain = g.kind == proxops_pve_sim::GuestType::Qemu
                && g.status == "stopped"
                && !g.config.contains_key("template");
            plain.then(|| (*vmid, g.clone(), name))
        }) else {
            return Err(DemoError::Repository(format!(
                "cluster `{cluster}` declares no stopped VM to change by hand"
            )));
        };
        let memory: u64 = guest
            .config
            .get("memory")
            .and_then(|m| m.parse().ok())
            .unwrap_or(2048);
        let tags: Vec<&str> = guest
            .config
            .get("tags")
            .map(|t| t.split(';').collect())
            .unwrap_or_default();
        let Some(dropped) = tags.iter().find(|t| !t.starts_with("proxops")) else {
            return Err(DemoError::Repository(format!(
                "VM `{name}` has no tag of its own to remove by hand"
            )));
        };
        let kept: Vec<&str> = tags.iter().copied().filter(|t| t != dropped).collect();
        let by_hand = vec![
            format!("memory: {memory} -> {}", memory * 2),
            format!("tags: {} removed", dropped),
        ];
        let found_cluster = head
            .repo()
            .cluster(cluster)
            .ok_or_else(|| DemoError::Repository(format!("no cluster `{cluster}`")))?;
        let backend = Backend::Sim {
            state_file: Some(self.ws.sim_state(cluster)),
            task_time: self.options.task_time,
        };
        let conn = connect(&self.registry, found_cluster, &backend)
            .await
            .map_err(|e| DemoError::Simulator(e.to_string()))?;
        let change = ConfigChange::default()
            .set("memory", (memory * 2).to_string())
            .set("tags", kept.join(";"));
        let written = conn
            .client
            .set_config(&GuestRef::qemu(&guest.node, vmid), &change)
            .await;
        if let Some(sim) = conn.sim {
            let _ = sim.shutdown().await;
        }
        written.map_err(|e| DemoError::Simulator(e.to_string()))?;
        let subject = format!("VM/{name}");
        self.note(&format!(
            "by hand in PVE: {subject} (vmid {vmid}): {}",
            by_hand.join(", ")
        ));
        // `proxops verify` before anything corrects it: only reads, the planes untouched.
        let verification = self.verify(head, cluster).await;
        self.emit(&DemoEvent::Verified(&verification));
        let verify = verification
            .resources
            .iter()
            .find(|r| r.subject() == subject)
            .cloned();
        let verified = verification.errors.is_empty()
            && verification.drifted().count() == 1
            && verify.as_ref().is_some_and(|v| {
                let keys: Vec<&str> = v.differences.iter().map(|d| d.key.as_str()).collect();
                v.state == VerifyState::Drifted && keys == ["memory", "tags"]
            });
        let run = self.cycle(head, cluster).await;
        failed_run(&run)?;
        let plan = run.cycles.first().map(|c| c.plan.clone());
        let found = plan.as_ref().is_some_and(|p| {
            let mut keys: Vec<&str> = p
                .actions
                .iter()
                .filter(|a| a.verb == Verb::Update && a.vmid == Some(vmid))
                .flat_map(|a| a.changes.iter().map(|c| c.key.as_str()))
                .collect();
            keys.sort_unstable();
            keys == ["memory", "tags"] && p.actions.len() == 1
        });
        let after = self.sim_state(cluster)?;
        let restored = after.guests.get(&vmid).is_some_and(|g| {
            g.config.get("memory") == guest.config.get("memory")
                && g.config.get("tags") == guest.config.get("tags")
        });
        Ok(Drifted {
            cluster: cluster.to_owned(),
            subject,
            vmid,
            by_hand,
            verify,
            verified,
            found,
            plan,
            restored,
            observed: observed_head(&run),
        })
    }

    /// `proxops verify` of `cluster` against its simulator.
    async fn verify(&self, head: &Head, cluster: &str) -> ClusterVerification {
        let backend = Backend::Sim {
            state_file: Some(self.ws.sim_state(cluster)),
            task_time: self.options.task_time,
        };
        let options = VerifyOptions::default().with_registry(Arc::clone(&self.registry));
        verify_cluster(
            &self.store,
            &backend,
            head.repo(),
            &self.ws.repo,
            cluster,
            &options,
        )
        .await
    }

    /// Takes the last guest no other resource depends on (not a template, not `spare`) out of
    /// the composition, commits, and runs one cycle.
    async fn prune(&self, head: &Head, cluster: &str, spare: &str) -> Result<Pruned, DemoError> {
        let graph = head
            .graph(cluster)
            .ok_or_else(|| DemoError::Repository(format!("no graph for `{cluster}`")))?;
        let candidate = graph
            .resources()
            .map(|id| (id, graph.resource(id)))
            .filter(|(_, r)| matches!(r.kind, "VM" | "LXC") && r.key().to_string() != spare)
            .filter(|(id, _)| {
                let steps = graph.steps_of(*id);
                !steps.is_empty() && steps.iter().all(|s| graph.dependants(*s).is_empty())
            })
            .filter_map(|(id, r)| {
                let vmid = graph
                    .steps_of(id)
                    .first()
                    .and_then(|s| graph.step(*s).vmid)?;
                Some((Arc::clone(r), vmid))
            })
            .last();
        let Some((resource, vmid)) = candidate else {
            return Err(DemoError::Repository(format!(
                "cluster `{cluster}` has no guest that nothing depends on, to remove"
            )));
        };
        let composition = self
            .ws
            .repo
            .join("clusters")
            .join(cluster)
            .join("resources.yaml");
        let text = std::fs::read_to_string(&composition).map_err(|e| DemoError::Io {
            what: format!("read {}", composition.display()),
            source: e,
        })?;
        let Some((kept, removed_line)) = without_entry(&text, cluster, &resource.file.path) else {
            return Err(DemoError::Repository(format!(
                "{} does not list {}",
                composition.display(),
                resource.file.path
            )));
        };
        std::fs::write(&composition, kept).map_err(|e| DemoError::Io {
            what: format!("write {}", composition.display()),
            source: e,
        })?;
        let subject = format!("{}/{}", resource.kind, resource.name());
        self.ws
            .commit(&format!("remove {subject} from the {cluster} composition"))?;
        self.note(&format!(
            "committed: `{}` taken out of clusters/{cluster}/resources.yaml",
            removed_line.trim()
        ));
        let head = self.head()?;
        let run = self.cycle(&head, cluster).await;
        failed_run(&run)?;
        let key = resource.key();
        let intent = run
            .desired
            .as_ref()
            .and_then(|d| d.state.deletions.get(&key))
            .map(|d| d.path.clone());
        let teardowns: usize = run
            .cycles
            .iter()
            .filter_map(|c| c.receipts.as_ref())
            .map(|r| r.teardowns)
            .sum();
        if let Some(path) = &intent {
            self.note(&format!(
                "the desired plane holds the deletion intent {path}; the observed plane, {}",
                if teardowns > 0 {
                    "its teardown"
                } else {
                    "no teardown yet"
                }
            ));
        }
        let after = self.sim_state(cluster)?;
        let tag = identity_tag(cluster, resource.kind, resource.name());
        let deleted = !after.guests.contains_key(&vmid)
            && !after.guests.values().any(|g| {
                g.config
                    .get("tags")
                    .is_some_and(|t| t.split(';').any(|x| x == tag))
            });
        Ok(Pruned {
            cluster: cluster.to_owned(),
            subject,
            vmid,
            removed_line: removed_line.trim().to_owned(),
            intent_recorded: intent.is_some(),
            intent,
            plan: run.cycles.first().map(|c| c.plan.clone()),
            deleted,
            teardown_recorded: teardowns > 0,
            guests_left: after.guests.len(),
        })
    }

    fn next(&self, cluster: &str) -> Vec<String> {
        let repo = self.ws.repo.display();
        if !self.ws.kept() {
            return vec![
                "run `proxops demo --keep` to keep the demo's repository and its simulators, then look around".to_owned(),
            ];
        }
        vec![
            format!("the demo's repository: {repo}"),
            format!("what was observed: git -C {repo} log --oneline proxops/observed/{cluster}"),
            format!("what was decided: git -C {repo} log --oneline proxops/desired/{cluster}"),
            format!(
                "the agent on it: proxops run --repo {repo} --backend sim --sim-state {}",
                self.ws.sim_dir().join("sim.json").display()
            ),
            "its status while it runs: http://127.0.0.1:9494/status".to_owned(),
        ]
    }
}

/// An error unless the run got as far as executing (a stuck or failed action is reported in
/// the report, not here).
fn failed_run(run: &ClusterRun) -> Result<(), DemoError> {
    if run.cycles.is_empty() || matches!(run.result, RunResult::Invalid | RunResult::Leased) {
        let why: Vec<String> = run.errors.iter().map(ToString::to_string).collect();
        return Err(DemoError::Repository(format!(
            "cluster {}: {}",
            run.cluster,
            why.join("; ")
        )));
    }
    Ok(())
}

/// The observed plane's head after a run, if its receipts were published.
fn observed_head(run: &ClusterRun) -> Option<String> {
    run.cycles
        .iter()
        .rev()
        .filter_map(|c| c.receipts.as_ref())
        .find_map(|r| r.publication.as_ref())
        .map(|p| p.head.to_string())
}

/// The composition without the line that lists `path` (repository-relative), and that line.
fn without_entry(text: &str, cluster: &str, path: &str) -> Option<(String, String)> {
    let base = format!("clusters/{cluster}");
    let mut removed = None;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let entry = line
            .trim()
            .strip_prefix("- ")
            .map(|e| e.trim().trim_matches(|c| c == '"' || c == '\''));
        if removed.is_none() && entry.is_some_and(|e| normalize(&base, e) == path) {
            removed = Some(line.to_owned());
            continue;
        }
        out.push_str(line);
    }
    removed.map(|r| (out, r))
}

/// `base/rel` with `.` and `..` resolved, `/`-separated.
fn normalize(base: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::{normalize, without_entry};

    #[test]
    fn a_composition_line_is_found_by_the_path_it_resolves_to() {
        assert_eq!(
            normalize("clusters/lab", "../../lxc/lab/ci.yaml"),
            "lxc/lab/ci.yaml"
        );
        let text = "resources:\n  - ../../vm/lab/a.yaml\n  - \"../../lxc/lab/ci.yaml\"\n";
        let (kept, line) = without_entry(text, "lab", "lxc/lab/ci.yaml").unwrap();
        assert_eq!(kept, "resources:\n  - ../../vm/lab/a.yaml\n");
        assert_eq!(line.trim(), "- \"../../lxc/lab/ci.yaml\"");
        assert!(without_entry(text, "lab", "lxc/lab/other.yaml").is_none());
    }
}
