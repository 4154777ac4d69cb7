//! A cluster's dependency graph as SVG, laid out by the agent itself: one column per level,
//! left to right, one box per step (a guest, or an artifact on one node), edges from each
//! prerequisite to what needs it. No Graphviz: the levels already are a layering.

use super::pages::{State, resource_href};
use crate::ClusterState;
use maud::{Markup, html};
use proxops_graph::Graph;

const BOX_W: u32 = 210;
const BOX_H: u32 = 42;
const GAP_X: u32 = 70;
const GAP_Y: u32 = 14;
const PAD: u32 = 16;
/// Characters of a name shown in a box; the full name is in its tooltip.
const NAME_CHARS: usize = 26;

/// Where one step's box is.
struct Placed {
    x: u32,
    y: u32,
}

/// The SVG of `graph` of `cluster`, each box coloured by its resource's state in `state`.
pub(crate) fn svg(cluster: &str, graph: &Graph, state: Option<&ClusterState>) -> Markup {
    let mut columns: Vec<Vec<usize>> = vec![Vec::new(); graph.level_count().max(1)];
    for step in graph.steps() {
        let level = usize::try_from(step.level).unwrap_or(0);
        if let Some(col) = columns.get_mut(level) {
            col.push(step.id.index());
        }
    }
    let key = |i: usize| {
        let s = &graph.steps()[i];
        (
            graph.kind(s.resource),
            graph.name(s.resource),
            s.node.clone(),
        )
    };
    let mut placed: Vec<Option<Placed>> = (0..graph.step_count()).map(|_| None).collect();
    for (level, col) in columns.iter_mut().enumerate() {
        col.sort_by(|a, b| key(*a).cmp(&key(*b)));
        for (row, i) in col.iter().enumerate() {
            placed[*i] = Some(Placed {
                x: PAD + level as u32 * (BOX_W + GAP_X),
                y: PAD + row as u32 * (BOX_H + GAP_Y),
            });
        }
    }
    let rows = columns.iter().map(Vec::len).max().unwrap_or(0) as u32;
    let width = 2 * PAD + columns.len() as u32 * (BOX_W + GAP_X) - GAP_X;
    let height = (2 * PAD + rows * (BOX_H + GAP_Y))
        .saturating_sub(GAP_Y)
        .max(2 * PAD);
    // One path per edge: a marker ends a path, not each of its sub-paths.
    let mut edges: Vec<String> = Vec::new();
    for step in graph.steps() {
        let Some(to) = &placed[step.id.index()] else {
            continue;
        };
        for p in graph.prerequisites(step.id) {
            let Some(from) = &placed[p.index()] else {
                continue;
            };
            let (x1, y1) = (from.x + BOX_W, from.y + BOX_H / 2);
            let (x2, y2) = (to.x, to.y + BOX_H / 2);
            let mid = (x1 + x2) / 2;
            edges.push(format!("M{x1} {y1} C{mid} {y1} {mid} {y2} {x2} {y2}"));
        }
    }
    html! {
        svg xmlns="http://www.w3.org/2000/svg" class="graph" role="img"
            viewBox=(format!("0 0 {width} {height}")) width=(width) height=(height)
            aria-label=(format!("dependency graph of cluster {cluster}: {} steps in {} levels",
                graph.step_count(), graph.level_count())) {
            defs {
                marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7"
                    markerHeight="7" orient="auto-start-reverse" {
                    path d="M0 0 L10 5 L0 10 z" class="arrowhead" {}
                }
            }
            g class="edges" {
                @for d in &edges { path d=(d) marker-end="url(#arrow)" {} }
            }
            @for step in graph.steps() {
                @if let Some(at) = &placed[step.id.index()] {
                    @let (kind, name) = (graph.kind(step.resource), graph.name(step.resource));
                    @let st = State::of(state, kind, name);
                    @let place = match (&step.node, step.vmid) {
                        (Some(n), Some(v)) => format!("{n} · {v}"),
                        (Some(n), None) => n.to_string(),
                        (None, Some(v)) => v.to_string(),
                        (None, None) => String::new(),
                    };
                    a href=(resource_href(cluster, kind, name)) class="step-link" {
                        g class={"step " (st.class())} data-kind=(kind) data-name=(name)
                            transform=(format!("translate({} {})", at.x, at.y)) {
                            title { (kind) "/" (name) " " (place) ": " (st.word()) }
                            rect width=(BOX_W) height=(BOX_H) rx="6" {}
                            text x="10" y="17" class="kind" { (kind) }
                            text x="10" y="33" class="name" { (short(name)) }
                            @if !place.is_empty() {
                                text x=(BOX_W - 8) y="17" class="place" text-anchor="end" { (place) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn short(name: &str) -> String {
    if name.chars().count() <= NAME_CHARS {
        name.to_owned()
    } else {
        let mut s: String = name.chars().take(NAME_CHARS - 1).collect();
        s.push('…');
        s
    }
}
