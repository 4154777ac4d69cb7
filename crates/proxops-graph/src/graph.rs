//! Building the graph: resolving references, finding cycles, laying out steps in create order.
//!
//! Edges and step lists live in flat arrays indexed by offsets (compressed sparse rows): a
//! cluster of 10,000 resources costs a handful of allocations instead of several per resource.

use crate::problem::{BuildError, CycleEdge, Problem};
use proxops_model::kind::{PlacementView, Reference, ReferenceSource};
use proxops_model::validate::{for_each_reference, references};
use proxops_model::{Registry, Resource, ResourceKey};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// A resource of the graph: its index among the cluster's resources sorted by (kind, name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId(pub(crate) u32);

impl ResourceId {
    /// The index, for tables kept beside the graph.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A step of the graph. Steps are numbered in create order, so comparing two ids compares their
/// places in that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StepId(pub(crate) u32);

impl StepId {
    /// The position in create order (0-based).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// One edge out of a resource: the resource it needs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dependency {
    /// The prerequisite.
    pub target: ResourceId,
    /// Where the edge comes from: a spec field such as `hardware.cdrom.iso`, or
    /// `proxops/depends-on`.
    pub field: &'static str,
    /// Structured field or annotation.
    pub source: ReferenceSource,
    /// Whether the prerequisite is needed on the dependant's own node (an ISO in a VM's cdrom),
    /// rather than wherever it is placed.
    pub same_node: bool,
}

/// A unit of work: creating one guest, or placing one artifact on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Its place in create order.
    pub id: StepId,
    /// The resource it belongs to.
    pub resource: ResourceId,
    /// The PVE node it runs on, if the resource names one.
    pub node: Option<Arc<str>>,
    /// The guest's vmid; `None` for artifacts.
    pub vmid: Option<u32>,
    /// Its topological level: 0 without prerequisites, else one more than its deepest
    /// prerequisite.
    pub level: u32,
}

/// Rows of ids in one flat array: row `i` is `items[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Default)]
pub(crate) struct Rows<T> {
    offsets: Vec<u32>,
    items: Vec<T>,
}

impl<T> Rows<T> {
    fn with_capacity(rows: usize, items: usize) -> Rows<T> {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Rows {
            offsets,
            items: Vec::with_capacity(items),
        }
    }

    fn push(&mut self, item: T) {
        self.items.push(item);
    }

    /// Closes the row being filled.
    fn end_row(&mut self) {
        self.offsets.push(self.items.len() as u32);
    }

    pub(crate) fn row(&self, i: usize) -> &[T] {
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(a), Some(b)) => &self.items[*a as usize..*b as usize],
            _ => &[],
        }
    }

    fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
}

/// The dependency graph of one cluster.
pub struct Graph {
    /// Sorted by (kind, name).
    resources: Vec<Arc<Resource>>,
    dependencies: Rows<Dependency>,
    resource_steps: Rows<StepId>,
    resource_levels: Vec<u32>,
    steps: Vec<Step>,
    prerequisites: Rows<StepId>,
    dependants: Rows<StepId>,
    /// Index of the first step of each level, plus the number of steps.
    level_starts: Vec<usize>,
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("resources", &self.resources.len())
            .field("steps", &self.steps.len())
            .field("levels", &self.level_count())
            .finish()
    }
}

/// FNV-1a: keys are short names from the repository, so a fast non-cryptographic hash is enough
/// (SipHash was a tenth of the build time at 10,000 resources).
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type Index<'a> = HashMap<(&'a str, &'a str), u32, BuildHasherDefault<Fnv>>;

impl Graph {
    /// Builds the graph of one cluster's resources, in any order. Fails with every problem found
    /// when a reference does not resolve inside `resources`, when an artifact is missing on the
    /// node of a guest that needs it there, when two resources share a kind and name, or when
    /// dependencies form cycles.
    pub fn build(registry: &Registry, resources: &[Arc<Resource>]) -> Result<Graph, BuildError> {
        let mut problems = Vec::new();
        let kept = unique(resources, &mut problems);
        let dependencies = resolve(registry, &kept, &mut problems);
        find_cycles(registry, &kept, &dependencies, &mut problems);
        let drafts = draft_steps(registry, &kept, &dependencies, &mut problems);
        if !problems.is_empty() {
            return Err(BuildError { problems });
        }
        Ok(order(kept, dependencies, drafts))
    }

    /// How many resources the graph holds.
    pub fn resource_count(&self) -> usize {
        self.resources.len()
    }

    /// Every resource, sorted by (kind, name).
    pub fn resources(&self) -> impl ExactSizeIterator<Item = ResourceId> + '_ {
        (0..self.resources.len() as u32).map(ResourceId)
    }

    /// The resource with this kind and name.
    pub fn find(&self, kind: &str, name: &str) -> Option<ResourceId> {
        self.resources
            .binary_search_by(|r| (r.kind, r.name()).cmp(&(kind, name)))
            .ok()
            .map(|i| ResourceId(i as u32))
    }

    /// The loaded resource.
    pub fn resource(&self, id: ResourceId) -> &Arc<Resource> {
        &self.resources[id.index()]
    }

    /// The canonical kind of a resource.
    pub fn kind(&self, id: ResourceId) -> &'static str {
        self.resources[id.index()].kind
    }

    /// The `metadata.name` of a resource.
    pub fn name(&self, id: ResourceId) -> &str {
        self.resources[id.index()].name()
    }

    /// (kind, name) of a resource.
    pub fn key(&self, id: ResourceId) -> ResourceKey {
        self.resources[id.index()].key()
    }

    /// The resource's edges: structured fields first, then the annotation, each target once.
    pub fn dependencies(&self, id: ResourceId) -> &[Dependency] {
        self.dependencies.row(id.index())
    }

    /// A resource's level: the highest level of its steps.
    pub fn level_of(&self, id: ResourceId) -> u32 {
        self.resource_levels[id.index()]
    }

    /// A resource's steps (one per node for artifacts), in create order.
    pub fn steps_of(&self, id: ResourceId) -> &[StepId] {
        self.resource_steps.row(id.index())
    }

    /// The step of a resource on `node` (`None` for a resource without a node).
    pub fn step_on(&self, id: ResourceId, node: Option<&str>) -> Option<StepId> {
        self.steps_of(id)
            .iter()
            .copied()
            .find(|s| self.step(*s).node.as_deref() == node)
    }

    /// How many steps the graph holds.
    pub fn step_count(&self) -> usize {
        self.steps.len()
    }

    /// One step.
    pub fn step(&self, id: StepId) -> &Step {
        &self.steps[id.index()]
    }

    /// Every step, in create order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The steps that must succeed before `id`, in create order.
    pub fn prerequisites(&self, id: StepId) -> &[StepId] {
        self.prerequisites.row(id.index())
    }

    /// The steps that need `id`, in create order.
    pub fn dependants(&self, id: StepId) -> &[StepId] {
        self.dependants.row(id.index())
    }

    /// How many levels there are.
    pub fn level_count(&self) -> usize {
        self.level_starts.len().saturating_sub(1)
    }

    /// The steps of each level, level 0 first; within a level, in create order.
    pub fn levels(&self) -> impl ExactSizeIterator<Item = &[Step]> + '_ {
        self.level_starts
            .windows(2)
            .map(|w| &self.steps[w[0]..w[1]])
    }

    /// Every step in the order to create: prerequisites always come first.
    pub fn create_order(&self) -> impl DoubleEndedIterator<Item = StepId> + ExactSizeIterator {
        (0..self.steps.len() as u32).map(StepId)
    }

    /// Every step in the order to delete: dependants always come first (create order reversed).
    pub fn prune_order(&self) -> impl DoubleEndedIterator<Item = StepId> + ExactSizeIterator {
        self.create_order().rev()
    }
}

/// The resources sorted by (kind, name), the first of each identity kept (input order decides),
/// the others reported.
fn unique(resources: &[Arc<Resource>], problems: &mut Vec<Problem>) -> Vec<Arc<Resource>> {
    let mut sorted: Vec<(&str, &str, &Arc<Resource>)> =
        resources.iter().map(|r| (r.kind, r.name(), r)).collect();
    // Stable, so of two resources with one identity the first given stays first.
    sorted.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut kept: Vec<Arc<Resource>> = Vec::with_capacity(sorted.len());
    for (kind, name, resource) in sorted {
        if let Some(last) = kept.last()
            && (last.kind, last.name()) == (kind, name)
        {
            problems.push(Problem::Duplicate {
                key: resource.key(),
                first: Arc::clone(last),
                again: Arc::clone(resource),
            });
            continue;
        }
        kept.push(Arc::clone(resource));
    }
    kept
}

/// Resolves every reference to a resource of the cluster.
fn resolve(
    registry: &Registry,
    resources: &[Arc<Resource>],
    problems: &mut Vec<Problem>,
) -> Rows<Dependency> {
    // A hash lookup touches one candidate; a binary search would chase a dozen scattered names.
    let mut index: Index<'_> = resources
        .iter()
        .enumerate()
        .map(|(i, r)| ((r.kind, r.name()), i as u32))
        .collect();
    // A cluster object whose PVE id differs from its name (`id: local_zfs`) is reached by that
    // id too: a guest's disk names the storage, not the manifest.
    for (i, r) in resources.iter().enumerate() {
        if let Some(id) = registry.get(r.kind).and_then(|k| k.pve_id(&r.spec)) {
            index.entry((r.kind, id)).or_insert(i as u32);
        }
    }
    let mut rows = Rows::with_capacity(resources.len(), resources.len() * 2);
    // An inferred reference without a name stands for every resource of its kind (a guest's
    // firewall rules after the cluster's one `Firewall`).
    let firewalls: Vec<u32> = resources
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind == "Firewall")
        .map(|(i, _)| i as u32)
        .collect();
    for r in resources {
        for_each_reference(registry, r, |x| {
            if x.source == ReferenceSource::Inferred && x.target_name.is_empty() {
                let all = if x.target_kind == "Firewall" {
                    firewalls.as_slice()
                } else {
                    &[]
                };
                for t in all {
                    rows.push(Dependency {
                        target: ResourceId(*t),
                        field: x.field,
                        source: x.source,
                        same_node: false,
                    });
                }
                return;
            }
            match index.get(&(x.target_kind.as_ref(), x.target_name.as_ref())) {
                Some(t) => rows.push(Dependency {
                    target: ResourceId(*t),
                    field: x.field,
                    source: x.source,
                    same_node: x.same_node,
                }),
                // An inferred reference to an object nobody declares (PVE's `local`) is no edge.
                None if x.source == ReferenceSource::Inferred => {}
                None => problems.push(Problem::UnknownTarget {
                    resource: Arc::clone(r),
                    reference: with_path(registry, r, x.field, &x.target_kind, &x.target_name),
                }),
            }
        });
        rows.end_row();
    }
    rows
}

/// The reference behind each edge of `members` that stays inside `members`, for labels.
fn cycle_edges(
    registry: &Registry,
    resources: &[Arc<Resource>],
    members: &[usize],
) -> Vec<CycleEdge> {
    let mut edges = Vec::new();
    for &m in members {
        let from = &resources[m];
        for x in references(registry, from) {
            let inside = members.iter().any(|o| {
                let r = &resources[*o];
                r.kind == x.target_kind && r.name() == x.target_name
            });
            if inside {
                edges.push(CycleEdge {
                    from: Arc::clone(from),
                    to: ResourceKey {
                        kind: x.target_kind.clone(),
                        name: x.target_name.clone(),
                    },
                    field: x.field,
                    path: x.path,
                });
            }
        }
    }
    edges
}

/// The full reference (with its YAML path, for labels) of `from`'s edge through `field` to
/// `kind`/`name`; only problems need it.
fn with_path(
    registry: &Registry,
    from: &Resource,
    field: &'static str,
    kind: &str,
    name: &str,
) -> Reference {
    references(registry, from)
        .into_iter()
        .find(|x| x.field == field && x.target_kind == kind && x.target_name == name)
        .unwrap_or_else(|| Reference {
            field,
            target_kind: kind.to_owned(),
            target_name: name.to_owned(),
            path: Vec::new(),
            same_node: false,
            source: ReferenceSource::Structured,
        })
}

/// Reports each strongly connected component with more than one member, and each self-loop.
fn find_cycles(
    registry: &Registry,
    resources: &[Arc<Resource>],
    dependencies: &Rows<Dependency>,
    problems: &mut Vec<Problem>,
) {
    let mut graph = petgraph::graph::DiGraph::<(), ()>::with_capacity(
        resources.len(),
        dependencies.items.len(),
    );
    for _ in resources {
        graph.add_node(());
    }
    for i in 0..dependencies.rows() {
        for d in dependencies.row(i) {
            graph.add_edge((i as u32).into(), d.target.0.into(), ());
        }
    }
    let mut cycles = Vec::new();
    for scc in petgraph::algo::tarjan_scc(&graph) {
        let mut members: Vec<usize> = scc.iter().map(|i| i.index()).collect();
        let self_loop = members.len() == 1
            && dependencies
                .row(members[0])
                .iter()
                .any(|d| d.target.index() == members[0]);
        if members.len() < 2 && !self_loop {
            continue;
        }
        // Resources are sorted by key, so sorting indices sorts members by (kind, name).
        members.sort_unstable();
        cycles.push(Problem::Cycle {
            members: members.iter().map(|m| resources[*m].key()).collect(),
            edges: cycle_edges(registry, resources, &members),
        });
    }
    // tarjan_scc's output order follows the traversal; sort for a stable report.
    cycles.sort_by(|a, b| match (a, b) {
        (Problem::Cycle { members: x, .. }, Problem::Cycle { members: y, .. }) => x.cmp(y),
        _ => std::cmp::Ordering::Equal,
    });
    problems.extend(cycles);
}

/// A step before it has its place in create order.
struct Draft {
    resource: u32,
    /// Index into the node names.
    node: Option<u32>,
    vmid: Option<u32>,
    level: u32,
}

/// Steps with their prerequisites, before ordering.
struct Drafts {
    steps: Vec<Draft>,
    prerequisites: Rows<u32>,
    /// Node names, sorted.
    node_names: Vec<Arc<str>>,
}

/// One step per resource and node, with prerequisites at step granularity: a guest on node `n`
/// needs a same-node artifact's step on `n`, and every step of any other prerequisite.
fn draft_steps(
    registry: &Registry,
    resources: &[Arc<Resource>],
    dependencies: &Rows<Dependency>,
    problems: &mut Vec<Problem>,
) -> Drafts {
    let placements: Vec<PlacementView<'_>> = resources
        .iter()
        .map(|r| {
            registry
                .get(r.kind)
                .map(|k| k.placement_view(&r.spec))
                .unwrap_or_default()
        })
        .collect();
    let mut names: Vec<&str> = placements
        .iter()
        .flat_map(|p| p.nodes.iter().map(AsRef::as_ref))
        .collect();
    names.sort_unstable();
    names.dedup();
    let node_index = |n: &str| names.binary_search(&n).ok().map(|i| i as u32);
    let mut steps = Vec::with_capacity(resources.len());
    let mut first_step = Vec::with_capacity(resources.len() + 1);
    for (i, PlacementView { nodes, vmid }) in placements.iter().enumerate() {
        first_step.push(steps.len() as u32);
        let before = steps.len();
        for n in nodes {
            let node = node_index(n);
            if steps[before..].iter().all(|d: &Draft| d.node != node) {
                steps.push(Draft {
                    resource: i as u32,
                    node,
                    vmid: *vmid,
                    level: 0,
                });
            }
        }
        if steps.len() == before {
            steps.push(Draft {
                resource: i as u32,
                node: None,
                vmid: *vmid,
                level: 0,
            });
        }
    }
    first_step.push(steps.len() as u32);
    let steps_of = |r: usize| first_step[r]..first_step[r + 1];
    let mut prerequisites = Rows::with_capacity(steps.len(), dependencies.items.len());
    let mut row: Vec<u32> = Vec::new();
    for (i, r) in resources.iter().enumerate() {
        for s in steps_of(i) {
            row.clear();
            let on = steps[s as usize].node;
            for dep in dependencies.row(i) {
                let targets = steps_of(dep.target.index());
                let placed = targets.clone().any(|t| steps[t as usize].node.is_some());
                let same = targets.clone().find(|t| steps[*t as usize].node == on);
                match (dep.same_node && placed, on, same) {
                    (true, Some(_), Some(t)) => row.push(t),
                    (true, Some(n), None) => problems.push(Problem::NotOnNode {
                        resource: Arc::clone(r),
                        reference: with_path(
                            registry,
                            r,
                            dep.field,
                            resources[dep.target.index()].kind,
                            resources[dep.target.index()].name(),
                        ),
                        node: names[n as usize].to_owned(),
                    }),
                    _ => row.extend(targets),
                }
            }
            row.sort_unstable();
            row.dedup();
            for p in &row {
                prerequisites.push(*p);
            }
            prerequisites.end_row();
        }
    }
    let node_names = names.iter().map(|n| Arc::from(*n)).collect();
    Drafts {
        steps,
        prerequisites,
        node_names,
    }
}

/// The reverse of `forward` over `n` rows, each row sorted.
fn reverse(forward: &Rows<u32>, n: usize) -> Rows<u32> {
    let mut counts = vec![0u32; n + 1];
    for p in &forward.items {
        counts[*p as usize + 1] += 1;
    }
    for i in 0..n {
        counts[i + 1] += counts[i];
    }
    let mut fill = counts.clone();
    let mut items = vec![0u32; forward.items.len()];
    for s in 0..forward.rows() {
        for p in forward.row(s) {
            let slot = &mut fill[*p as usize];
            items[*slot as usize] = s as u32;
            *slot += 1;
        }
    }
    Rows {
        offsets: counts,
        items,
    }
}

/// Levels by Kahn's algorithm (the graph is acyclic here), then the steps sorted into create
/// order and renumbered.
fn order(resources: Vec<Arc<Resource>>, dependencies: Rows<Dependency>, drafts: Drafts) -> Graph {
    let Drafts {
        mut steps,
        prerequisites,
        node_names,
    } = drafts;
    let n = steps.len();
    let dependants = reverse(&prerequisites, n);
    let mut waiting: Vec<u32> = (0..n).map(|s| prerequisites.row(s).len() as u32).collect();
    let mut ready: VecDeque<usize> = (0..n).filter(|s| waiting[*s] == 0).collect();
    while let Some(s) = ready.pop_front() {
        let level = steps[s].level + 1;
        for d in dependants.row(s) {
            let d = *d as usize;
            steps[d].level = steps[d].level.max(level);
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push_back(d);
            }
        }
    }
    // Sort on one integer per step: level, node (none first, then by name), vmid (none first),
    // and for resources without a vmid (artifacts) their rank by (name, kind). Only guests
    // sharing a vmid, which validation rejects, fall back to comparing names.
    let mut unnumbered: Vec<u32> = steps
        .iter()
        .filter(|d| d.vmid.is_none())
        .map(|d| d.resource)
        .collect();
    unnumbered.sort_unstable();
    unnumbered.dedup();
    unnumbered.sort_by(|a, b| {
        let (p, q) = (&resources[*a as usize], &resources[*b as usize]);
        (p.name(), p.kind).cmp(&(q.name(), q.kind))
    });
    let mut name_rank = vec![0u32; resources.len()];
    for (rank, r) in unnumbered.iter().enumerate() {
        name_rank[*r as usize] = rank as u32;
    }
    let key = |d: &Draft| -> u128 {
        let node = d.node.map_or(0, |n| u128::from(n) + 1);
        let third = d
            .vmid
            .map_or(u128::from(name_rank[d.resource as usize]), |v| {
                (1 << 32) + u128::from(v)
            });
        (u128::from(d.level) << 96) | (node << 64) | third
    };
    let keys: Vec<u128> = steps.iter().map(key).collect();
    let mut rank: Vec<u32> = (0..n as u32).collect();
    rank.sort_unstable_by(|a, b| {
        keys[*a as usize].cmp(&keys[*b as usize]).then_with(|| {
            let (x, y) = (&steps[*a as usize], &steps[*b as usize]);
            let (p, q) = (
                &resources[x.resource as usize],
                &resources[y.resource as usize],
            );
            (p.name(), p.kind).cmp(&(q.name(), q.kind))
        })
    });
    let mut new_id = vec![0u32; n];
    for (place, old) in rank.iter().enumerate() {
        new_id[*old as usize] = place as u32;
    }
    let renumber = |rows: &Rows<u32>| {
        let mut out = Rows::with_capacity(n, rows.items.len());
        let mut row: Vec<StepId> = Vec::new();
        for old in &rank {
            row.clear();
            row.extend(
                rows.row(*old as usize)
                    .iter()
                    .map(|p| StepId(new_id[*p as usize])),
            );
            row.sort_unstable();
            for p in &row {
                out.push(*p);
            }
            out.end_row();
        }
        out
    };
    let prerequisites = renumber(&prerequisites);
    let dependants = renumber(&dependants);
    let mut level_starts = Vec::new();
    let mut ordered: Vec<Step> = Vec::with_capacity(n);
    let mut resource_levels = vec![0u32; resources.len()];
    let mut per_resource: Vec<u32> = vec![0; resources.len()];
    for (place, old) in rank.iter().enumerate() {
        let d = &steps[*old as usize];
        if level_starts.len() <= d.level as usize {
            // Levels are contiguous: a step at level k has a prerequisite at level k - 1.
            level_starts.resize(d.level as usize + 1, place);
        }
        let r = d.resource as usize;
        resource_levels[r] = resource_levels[r].max(d.level);
        per_resource[r] += 1;
        ordered.push(Step {
            id: StepId(place as u32),
            resource: ResourceId(d.resource),
            node: d.node.map(|i| Arc::clone(&node_names[i as usize])),
            vmid: d.vmid,
            level: d.level,
        });
    }
    level_starts.push(n);
    // Each resource's steps, in create order.
    let mut offsets = Vec::with_capacity(resources.len() + 1);
    offsets.push(0u32);
    for count in &per_resource {
        let last = offsets.last().copied().unwrap_or(0);
        offsets.push(last + count);
    }
    let mut fill: Vec<u32> = offsets.clone();
    let mut items = vec![StepId(0); n];
    for step in &ordered {
        let slot = &mut fill[step.resource.index()];
        items[*slot as usize] = step.id;
        *slot += 1;
    }
    Graph {
        resources,
        dependencies,
        resource_steps: Rows { offsets, items },
        resource_levels,
        steps: ordered,
        prerequisites,
        dependants,
        level_starts,
    }
}
