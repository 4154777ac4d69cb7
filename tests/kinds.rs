//! Every cluster kind's lifecycle (issue 32's acceptance), engine + simulator, one test per
//! kind from one table entry each: created as declared (marked where PVE has a free-text
//! field), one key updated, a hand change of an owned key restored, pruned when its manifest
//! leaves a composition that still declares something (a hand-made object of the kind is never
//! deleted), and a hand-made one adopted: `adopt_objects`'s manifest loads and the plan only
//! writes ProxOps's mark (nothing at all where a receipt proves ownership), leaving every other
//! field as it was. An API token is refused by adopt (its secret) and taken over by a matching
//! manifest instead.

mod access;
mod cluster;
mod harness;
