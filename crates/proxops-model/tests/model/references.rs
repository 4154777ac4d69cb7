//! Reference expressions (`proxops_model::expr`): one test per coded error, masking, resolution
//! and the dependency edge.

use crate::support::*;
use proxops_model::{Code, Registry};

const CLUSTER: &str = "dev";

fn cluster_of(files: &[(&str, String)]) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster(CLUSTER, &["pve01", "pve02"]);
    repo.listing(CLUSTER, files);
    repo
}

fn covered(d: &proxops_model::Diagnostic) -> &str {
    let l = &d.labels[0];
    &l.file.text[l.span.start..l.span.end]
}

/// A VM `web` whose cloud-init nameservers hold `expr` (one flow-style line) and the LXC
/// `pihole` (one NIC, `net0`) it may read.
fn consumer(expr: &str) -> TempRepo {
    let web = with_spec(
        &vm("web", "pve01", 142),
        &["cloud-init-data:", &format!("  nameservers: [{expr}]")],
    );
    cluster_of(&[
        ("vm/dev/web.yaml", web),
        (
            "lxc/dev/pihole.yaml",
            with_spec(
                &lxc("pihole", "pve01", 150, "debian"),
                &[
                    "networks:",
                    "  - bridge: vmbr0",
                    "    iface: eth0",
                    "    ip: dhcp",
                ],
            ),
        ),
        (
            "ctt/dev/debian.yaml",
            artifact("CTTemplate", "debian", &["pve01"]),
        ),
    ])
}

#[test]
fn a_well_formed_expression_is_masked_and_becomes_a_dependency() {
    let repo = consumer(
        "{fromArtifact: {resource: LXC/pihole, name: ip-addresses, pointer: /net0/ipv4/0}}",
    )
    .load();
    assert_valid(&repo);
    let cluster = repo.cluster(CLUSTER).expect("dev");
    let web = resource(cluster, "VM", "web");
    assert!(web.unresolved());
    assert_eq!(web.exprs.len(), 1);
    assert_eq!(web.exprs[0].expr.key(), "fromArtifact");
    assert_eq!(edges(web), vec!["LXC/pihole".to_owned()]);
    // Resolving puts the value where the expression was, with the field's checks.
    let resolved = proxops_model::manifest::resolve_resource(
        web,
        &Registry::builtin(),
        &[serde_json::json!("10.0.0.53")],
    )
    .expect("resolves");
    assert!(resolved.resolved && !resolved.unresolved());
    let spec = serde_json::to_value(&resolved.spec).expect("json");
    assert_eq!(
        spec["cloud-init-data"]["nameservers"],
        serde_json::json!(["10.0.0.53"])
    );
}

#[test]
fn a_resolved_value_is_checked_like_a_written_one() {
    let repo = consumer("{fromReceipt: {resource: LXC/pihole, pointer: /outcome}}").load();
    let web = resource(repo.cluster(CLUSTER).expect("dev"), "VM", "web");
    // A list where one string is expected: refused, labelled on the expression.
    let e = proxops_model::manifest::resolve_resource(
        web,
        &Registry::builtin(),
        &[serde_json::json!(["a"])],
    )
    .expect_err("not a string");
    assert!(
        covered(&e[0]).starts_with("{fromReceipt"),
        "{}",
        covered(&e[0])
    );
}

#[test]
fn dry_fallback_masks_the_site() {
    let repo =
        consumer("{fromReceipt: {resource: LXC/pihole, pointer: /outcome, dryFallback: 10.9.9.9}}")
            .load();
    assert_valid(&repo);
    let web = resource(repo.cluster(CLUSTER).expect("dev"), "VM", "web");
    assert_eq!(
        web.exprs[0].dry_fallback,
        Some(serde_json::json!("10.9.9.9"))
    );
    let spec = serde_json::to_value(&web.spec).expect("json");
    assert_eq!(spec["cloud-init-data"]["nameservers"][0], "10.9.9.9");
}

#[test]
fn an_expression_that_would_wait_forever_refuses_only_its_resource() {
    for (expr, words) in [
        (
            "{fromArtifact: {resource: LXC/pihole, name: ip-adress, pointer: /net0/ipv4/0}}",
            &["no artifact `ip-adress`", "did you mean `ip-addresses`?"][..],
        ),
        (
            "{fromArtifact: {resource: LXC/pihole, name: ip-addresses, pointer: /net2/ipv4/0}}",
            &["no NIC `net2`: it has net0"][..],
        ),
        (
            "{fromReceipt: {resource: LXC/pihole, pointer: /outcom}}",
            &["no field `outcom`", "did you mean `outcome`?"][..],
        ),
    ] {
        let repo = consumer(expr).load();
        let d = only_error(&repo, Code::ReferenceUnresolvable, &words[..1]);
        let said = format!("{} {}", d.message, d.help.as_deref().unwrap_or_default());
        for w in words {
            assert!(said.contains(w), "{expr}: {said}");
        }
        assert_eq!(covered(d), expr, "labelled on the expression");
        // The cluster stays valid: only VM/web waits.
        assert!(repo.cluster(CLUSTER).expect("dev").valid, "{expr}");
    }
}

#[test]
fn wait_timeout_is_a_duration_and_the_shortest_one_counts() {
    let repo =
        consumer("{fromReceipt: {resource: LXC/pihole, pointer: /outcome, waitTimeout: soon}}")
            .load();
    let d = only_error(&repo, Code::ReferenceShape, &["`soon` is not a duration"]);
    assert_eq!(covered(d), "soon");
    let repo = consumer(
        "{fromReceipt: {resource: LXC/pihole, pointer: /outcome, waitTimeout: 1h30m}}, {fromReceipt: {resource: LXC/pihole, pointer: /outcome, waitTimeout: 90s}}",
    )
    .load();
    assert_valid(&repo);
    let web = resource(repo.cluster(CLUSTER).expect("dev"), "VM", "web");
    assert_eq!(web.wait_timeout(), std::time::Duration::from_secs(90));
    let repo = consumer("{fromReceipt: {resource: LXC/pihole, pointer: /outcome}}").load();
    let web = resource(repo.cluster(CLUSTER).expect("dev"), "VM", "web");
    assert_eq!(
        web.wait_timeout(),
        proxops_model::expr::DEFAULT_WAIT_TIMEOUT
    );
}

#[test]
fn expression_keys_another_key_beside_a_reference_expression() {
    let repo = consumer("{fromArtifact: {resource: LXC/pihole, name: a}, extra: 1}").load();
    let d = only_error(&repo, Code::ExpressionKeys, &["only key", "`extra`"]);
    assert_eq!(covered(d), "extra");
}

#[test]
fn reference_shape_unknown_and_missing_fields() {
    let repo = consumer("{fromArtifact: {resource: LXC/pihole, nme: a}}").load();
    let all = all_with(&repo, Code::ReferenceShape);
    assert_eq!(all.len(), 2, "{}", dump(&repo));
    assert!(all.iter().any(|d| d.message.contains("unknown field `nme`")
        && d.help.as_deref() == Some("did you mean `name`?")));
    assert!(all.iter().any(|d| d.message.contains("needs `name`")));
}

#[test]
fn reference_pointer_is_rfc_6901() {
    let repo = consumer("{fromReceipt: {resource: LXC/pihole, pointer: outcome}}").load();
    let d = only_error(
        &repo,
        Code::ReferencePointer,
        &["`outcome`", "start with `/`"],
    );
    assert_eq!(covered(d), "outcome");
    let repo = consumer("{fromReceipt: {resource: LXC/pihole, pointer: /a~2}}").load();
    only_error(&repo, Code::ReferencePointer, &["`~0` or `~1`"]);
}

#[test]
fn reference_target_is_kind_slash_name() {
    let repo = consumer("{fromReceipt: {resource: pihole}}").load();
    let d = only_error(&repo, Code::ReferenceTarget, &["`pihole`", "Kind/name"]);
    assert_eq!(covered(d), "pihole");
    let repo = consumer("{fromReceipt: {resource: Container/pihole}}").load();
    let d = only_error(&repo, Code::ReferenceTarget, &["Container/pihole"]);
    assert!(d.help.as_deref().unwrap_or_default().contains("not a kind"));
}

#[test]
fn reference_context_parameters_outside_a_stack_template() {
    for word in ["fromParameter", "fromItem"] {
        let repo = consumer(&format!("{{{word}: {{name: dns}}}}")).load();
        let d = only_error(&repo, Code::ReferenceContext, &[word, "StackTemplate"]);
        assert_eq!(covered(d), word);
    }
}

#[test]
fn reference_field_identity_and_references_stay_values() {
    let web = vm("web", "pve01", 142).replace(
        "  vmid: 142\n",
        "  vmid: {fromReceipt: {resource: LXC/pihole, pointer: /pveIdentity/vmid}}\n",
    );
    let repo = cluster_of(&[
        ("vm/dev/web.yaml", web),
        ("lxc/dev/pihole.yaml", lxc("pihole", "pve01", 150, "debian")),
        (
            "ctt/dev/debian.yaml",
            artifact("CTTemplate", "debian", &["pve01"]),
        ),
    ])
    .load();
    let d = only_error(&repo, Code::ReferenceField, &["`vmid`"]);
    assert!(covered(d).starts_with("{fromReceipt"));
    // An LXC's template names a CTTemplate: a graph edge, fixed at load.
    let ct = lxc("ct", "pve01", 151, "debian")
        .replace("  template: debian\n", "  template: {fromPromotion: {}}\n");
    let repo = cluster_of(&[
        ("lxc/dev/ct.yaml", ct),
        (
            "ctt/dev/debian.yaml",
            artifact("CTTemplate", "debian", &["pve01"]),
        ),
    ])
    .load();
    only_error(&repo, Code::ReferenceField, &["`template`"]);
}

#[test]
fn a_producer_outside_the_composition_is_an_unknown_reference() {
    let web = with_spec(
        &vm("web", "pve01", 142),
        &[
            "cloud-init-data:",
            "  nameservers: [{fromReceipt: {resource: LXC/ghost}}]",
        ],
    );
    let repo = cluster_of(&[("vm/dev/web.yaml", web)]).load();
    let d = only_error(
        &repo,
        Code::UnknownReference,
        &["fromReceipt", "LXC `ghost`"],
    );
    assert!(covered(d).starts_with("{fromReceipt"));
}
