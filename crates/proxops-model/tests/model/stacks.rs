//! Stacks: projection, and one test per coded error of StackTemplates and Stacks, with labels in
//! both the Stack's and the template's files.

use crate::support::*;
use miette::{GraphicalReportHandler, GraphicalTheme};
use proxops_model::{Code, Diagnostic, Repository};

const CLUSTER: &str = "dev";
const TEMPLATE_PATH: &str = "stacktemplate/base/k3s.yaml";
const STACK_PATH: &str = "stack/dev/k3s.yaml";

const TEMPLATE: &str = "\
apiVersion: proxops/v1alpha1
kind: StackTemplate
metadata:
  name: k3s
spec:
  parameters:
    node:
      type: string
    server-vmid:
      type: integer
    memory:
      type: string
      default: 2GiB
    agents:
      type: list
      items:
        name: string
        vmid: integer
  resources:
    - kind: VM
      name: server
      spec:
        node: {fromParameter: {name: node}}
        vmid: {fromParameter: {name: server-vmid}}
        memory: {fromParameter: {name: memory}}
        cpu: {type: host, cores: 1}
        disks:
          - {storage: local-lvm, size: 8GiB}
    - kind: VM
      name: agent
      forEach: {fromParameter: {name: agents}}
      dependsOn: [server]
      spec:
        node: {fromParameter: {name: node}}
        vmid: {fromItem: {pointer: /vmid}}
        memory: 1GiB
        cpu: {type: host, cores: 1}
        disks:
          - {storage: local-lvm, size: 8GiB}
";

const STACK: &str = "\
apiVersion: proxops/v1alpha1
kind: Stack
metadata:
  name: k3s
spec:
  template: k3s
  parameters:
    node: pve01
    server-vmid: 200
    agents:
      - {name: a1, vmid: 201}
      - {name: a2, vmid: 202}
";

/// A repository with cluster `dev` listing the template and the Stack (edited by `edit`), and
/// `extra` files.
fn stack_repo(template: &str, stack: &str, extra: &[(&str, String)]) -> Repository {
    let repo = TempRepo::new();
    repo.cluster(CLUSTER, &["pve01", "pve02"]);
    let mut files = vec![
        (TEMPLATE_PATH, template.to_owned()),
        (STACK_PATH, stack.to_owned()),
    ];
    files.extend(extra.iter().cloned());
    repo.listing(CLUSTER, &files);
    repo.load()
}

fn edited(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not in the text");
    text.replacen(from, to, 1)
}

fn covered(label: &proxops_model::diagnostic::Label) -> &str {
    &label.file.text[label.span.start..label.span.end]
}

/// The (file, covered text) of every label.
fn labels(d: &Diagnostic) -> Vec<(&str, &str)> {
    d.labels
        .iter()
        .map(|l| (l.file.path.as_str(), covered(l)))
        .collect()
}

fn render(d: &Diagnostic) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .render_report(&mut out, &d.to_miette())
        .expect("render");
    out
}

#[test]
fn a_stack_projects_named_resources_with_defaults_items_and_dependencies() {
    let repo = stack_repo(
        TEMPLATE,
        STACK,
        &[("vm/dev/db.yaml", vm("db", "pve01", 100))],
    );
    assert_valid(&repo);
    let dev = repo.cluster(CLUSTER).expect("dev");
    let names: Vec<String> = dev.resources.iter().map(|r| r.key().to_string()).collect();
    // Listed resources first, then each Stack's projection in template order.
    assert_eq!(
        names,
        [
            "VM/db",
            "VM/k3s-server",
            "VM/k3s-agent-a1",
            "VM/k3s-agent-a2"
        ]
    );
    let server = resource(dev, "VM", "k3s-server");
    let json = serde_json::to_value(&server.spec).expect("json");
    assert_eq!(json["vmid"], 200);
    assert_eq!(json["node"], "pve01");
    // The default applies when the Stack supplies nothing.
    assert_eq!(json["memory"], "2GiB");
    let agent = resource(dev, "VM", "k3s-agent-a2");
    assert_eq!(
        serde_json::to_value(&agent.spec).expect("json")["vmid"],
        202
    );
    assert_eq!(edges(agent), ["VM/k3s-server"]);
    let origin = agent.stack_origin().expect("projected");
    assert_eq!(
        (
            origin.stack.as_str(),
            origin.logical.as_str(),
            origin.item.as_deref()
        ),
        ("k3s", "agent", Some("a2"))
    );
    assert_eq!(dev.stacks.len(), 1);
    assert_eq!(dev.stacks[0].resources.len(), 3);
    assert!(server.stack_origin().is_some());
    // Hand-written resources are not projected.
    assert!(resource(dev, "VM", "db").stack_origin().is_none());
}

#[test]
fn a_subset_projects_only_its_resources() {
    let stack = format!("{STACK}  resources: [server]\n");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    assert_valid(&repo);
    let names: Vec<String> = repo
        .cluster(CLUSTER)
        .expect("dev")
        .resources
        .iter()
        .map(|r| r.key().to_string())
        .collect();
    assert_eq!(names, ["VM/k3s-server"]);
}

#[test]
fn other_expression_forms_are_left_in_the_projected_spec() {
    // `fromArtifact` belongs to reference resolution: the Stack leaves it as written, and each
    // projected resource then holds it as a reference (here to a producer the cluster lacks,
    // found on every projection at the template's line).
    let template = edited(
        TEMPLATE,
        "        memory: 1GiB\n",
        "        memory: 1GiB\n        pve-description: {fromArtifact: {resource: LXC/x, name: ip-addresses, pointer: /a}}\n",
    );
    let repo = stack_repo(&template, STACK, &[]);
    let found = all_with(&repo, Code::UnknownReference);
    assert_eq!(found.len(), 2, "{}", dump(&repo));
    assert!(
        found
            .iter()
            .all(|d| labels(d).iter().any(|(_, t)| t.contains("fromArtifact"))),
        "{}",
        dump(&repo)
    );
}

#[test]
fn expression_keys() {
    let template = edited(
        TEMPLATE,
        "vmid: {fromItem: {pointer: /vmid}}",
        "vmid: {fromItem: {pointer: /vmid}, default: 1}",
    );
    let repo = stack_repo(&template, STACK, &[]);
    let d = only_error(
        &repo,
        Code::ExpressionKeys,
        &["`default` beside `fromItem`"],
    );
    assert_eq!(labels(d), [(TEMPLATE_PATH, "default")]);
}

#[test]
fn unknown_stack_template() {
    let stack = edited(STACK, "template: k3s", "template: k3z");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    let d = only_error(&repo, Code::UnknownStackTemplate, &["StackTemplate `k3z`"]);
    assert_eq!(labels(d), [(STACK_PATH, "k3z")]);
    assert_eq!(d.help.as_deref(), Some("did you mean `k3s`?"));
    assert!(repo.cluster(CLUSTER).expect("dev").resources.is_empty());
}

#[test]
fn stack_parameter_missing() {
    let stack = edited(STACK, "    server-vmid: 200\n", "");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    let d = only_error(
        &repo,
        Code::StackParameterMissing,
        &["`server-vmid`", "no default"],
    );
    assert_eq!(
        labels(d),
        [(STACK_PATH, "parameters"), (TEMPLATE_PATH, "server-vmid")]
    );
    assert!(!repo.cluster(CLUSTER).expect("dev").valid);
}

#[test]
fn stack_parameter_type() {
    let stack = edited(STACK, "server-vmid: 200", "server-vmid: two-hundred");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    let d = only_error(
        &repo,
        Code::StackParameterType,
        &["`server-vmid` is an integer"],
    );
    assert_eq!(
        labels(d),
        [(STACK_PATH, "two-hundred"), (TEMPLATE_PATH, "server-vmid")]
    );
    // A number where text is declared must be quoted.
    let stack = edited(STACK, "node: pve01", "node: 7");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    only_error(&repo, Code::StackParameterType, &["quote it"]);
    // Items are typed field by field.
    let stack = edited(STACK, "{name: a2, vmid: 202}", "{name: a2, vmid: x}");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    let d = only_error(&repo, Code::StackParameterType, &["`vmid` of item 1"]);
    assert_eq!(labels(d)[0], (STACK_PATH, "x"));
    // A default of the wrong type is the template's error.
    let template = edited(TEMPLATE, "default: 2GiB", "default: [2GiB]");
    let repo = stack_repo(&template, STACK, &[]);
    let d = only_error(&repo, Code::StackParameterType, &["`memory`"]);
    assert_eq!(d.primary_file(), Some(TEMPLATE_PATH));
}

#[test]
fn stack_parameter_unknown() {
    let stack = edited(
        STACK,
        "    node: pve01\n",
        "    node: pve01\n    nodes: pve02\n",
    );
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    let d = only_error(
        &repo,
        Code::StackParameterUnknown,
        &["`nodes`", "does not declare"],
    );
    assert_eq!(labels(d)[0], (STACK_PATH, "nodes"));
    assert_eq!(d.labels[1].file.path, TEMPLATE_PATH);
    assert_eq!(d.help.as_deref(), Some("did you mean `node`?"));
    // A template expression reading an undeclared parameter.
    let template = edited(
        TEMPLATE,
        "{fromParameter: {name: memory}}",
        "{fromParameter: {name: ram}}",
    );
    let repo = stack_repo(&template, STACK, &[]);
    let d = only_error(&repo, Code::StackParameterUnknown, &["no parameter `ram`"]);
    assert_eq!(labels(d), [(TEMPLATE_PATH, "ram")]);
}

#[test]
fn stack_for_each_over_a_non_list() {
    let template = edited(
        TEMPLATE,
        "forEach: {fromParameter: {name: agents}}",
        "forEach: {fromParameter: {name: node}}",
    );
    let repo = stack_repo(&template, STACK, &[]);
    let d = only_error(&repo, Code::StackForEach, &["`node`, a string, not a list"]);
    assert_eq!(labels(d), [(TEMPLATE_PATH, "node")]);
}

#[test]
fn stack_for_each_items_and_pointers() {
    // `fromItem` outside a `forEach`.
    let template = edited(
        TEMPLATE,
        "vmid: {fromParameter: {name: server-vmid}}",
        "vmid: {fromItem: {pointer: /vmid}}",
    );
    let repo = stack_repo(&template, STACK, &[]);
    only_error(&repo, Code::StackForEach, &["without `forEach`"]);
    // A pointer the items do not have (items without declared fields).
    let template = edited(
        TEMPLATE,
        "      items:\n        name: string\n        vmid: integer\n",
        "",
    )
    .replace("{fromItem: {pointer: /vmid}}", "{fromItem: {pointer: /id}}");
    let repo = stack_repo(&template, STACK, &[]);
    let found = all_with(&repo, Code::StackForEach);
    assert_eq!(found.len(), 2, "{}", dump(&repo));
    assert_eq!(
        labels(found[0]),
        [(TEMPLATE_PATH, "/id"), (STACK_PATH, "name")]
    );
    // An item without a name.
    let template = edited(
        TEMPLATE,
        "      items:\n        name: string\n        vmid: integer\n",
        "",
    );
    let stack = edited(STACK, "{name: a2, vmid: 202}", "{vmid: 202}");
    let repo = stack_repo(&template, &stack, &[]);
    let d = only_error(&repo, Code::StackForEach, &["no text `name`"]);
    assert_eq!(labels(d), [(STACK_PATH, "vmid"), (TEMPLATE_PATH, "agent")]);
}

#[test]
fn stack_subset() {
    let stack = format!("{STACK}  resources: [agent]\n");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    let d = only_error(
        &repo,
        Code::StackSubset,
        &["holds `agent` but not `server`"],
    );
    assert_eq!(labels(d), [(STACK_PATH, "agent"), (TEMPLATE_PATH, "agent")]);
    let stack = format!("{STACK}  resources: [server, db]\n");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    only_error(&repo, Code::StackSubset, &["`db`, which is not a resource"]);
}

#[test]
fn stack_template_structure() {
    let template = edited(TEMPLATE, "dependsOn: [server]", "dependsOn: [srv]");
    let repo = stack_repo(&template, STACK, &[]);
    let d = only_error(&repo, Code::StackTemplate, &["depends on `srv`"]);
    assert_eq!(labels(d), [(TEMPLATE_PATH, "srv")]);
    let template = edited(TEMPLATE, "      name: agent\n", "      name: server\n");
    let repo = stack_repo(&template, STACK, &[]);
    let found = all_with(&repo, Code::StackTemplate);
    assert_eq!(found.len(), 1, "{}", dump(&repo));
    assert_contains(&found[0].message, &["two resources named `server`"]);
}

#[test]
fn a_projected_vmid_collision_points_at_the_stack_and_the_template() {
    let hand = vm("db", "pve01", 201);
    let repo = stack_repo(TEMPLATE, STACK, &[("vm/dev/db.yaml", hand)]);
    let d = only_error(
        &repo,
        Code::VmidCollision,
        &["PVE id 201", "VM/k3s-agent-a1"],
    );
    let files: Vec<&str> = d.labels.iter().map(|l| l.file.path.as_str()).collect();
    assert_eq!(
        files,
        [TEMPLATE_PATH, STACK_PATH, "vm/dev/db.yaml"],
        "{}",
        dump(&repo)
    );
    assert_eq!(covered(&d.labels[0]), "{fromItem: {pointer: /vmid}}");
    assert_eq!(covered(&d.labels[1]), "201");
    insta::assert_snapshot!(render(d), @r#"
        proxops::vmid_collision

          × PVE id 201 is claimed by both VM/db and VM/k3s-agent-a1
            ╭─[stacktemplate/base/k3s.yaml:35:15]
         34 │         node: {fromParameter: {name: node}}
         35 │         vmid: {fromItem: {pointer: /vmid}}
            ·               ──────────────┬─────────────
            ·                             ╰── vmid 201 of VM/k3s-agent-a1
         36 │         memory: 1GiB
            ╰────
          help: vmids are unique per cluster, across VMs, containers and templates: PVE's vmid namespace
                is cluster-wide

        Advice: 
          ☞ see also stack/dev/k3s.yaml
            ╭─[stack/dev/k3s.yaml:11:26]
         10 │     agents:
         11 │       - {name: a1, vmid: 201}
            ·                          ─┬─
            ·                           ╰── value given by Stack `k3s` for VM/k3s-agent-a1
         12 │       - {name: a2, vmid: 202}
            ╰────

        Advice: 
          ☞ see also vm/dev/db.yaml
           ╭─[vm/dev/db.yaml:7:9]
         6 │   node: pve01
         7 │   vmid: 201
           ·         ─┬─
           ·          ╰── also claimed by VM/db
         8 │   memory: 1GiB
           ╰────
        "#);
}

#[test]
fn a_projected_spec_error_points_at_the_stack_value() {
    let stack = edited(STACK, "node: pve01", "node: pve09");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    let found = all_with(&repo, Code::NodeNotAllowed);
    assert_eq!(found.len(), 3, "{}", dump(&repo));
    assert_eq!(
        labels(found[0]),
        [
            (TEMPLATE_PATH, "{fromParameter: {name: node}}"),
            (STACK_PATH, "pve09")
        ]
    );
    // Decoding errors of the projected manifest carry the Stack's label too.
    let stack = edited(STACK, "node: pve01\n", "node: pve01\n    memory: lots\n");
    let repo = stack_repo(TEMPLATE, &stack, &[]);
    let d = only_error(&repo, Code::InvalidValue, &[]);
    assert_eq!(
        labels(d),
        [
            (TEMPLATE_PATH, "{fromParameter: {name: memory}}"),
            (STACK_PATH, "lots")
        ]
    );
}

#[test]
fn a_stack_outside_its_cluster_directory_is_refused() {
    let repo = TempRepo::new();
    repo.cluster(CLUSTER, &["pve01", "pve02"]);
    repo.listing(
        CLUSTER,
        &[
            (TEMPLATE_PATH, TEMPLATE.to_owned()),
            ("stack/base/k3s.yaml", STACK.to_owned()),
        ],
    );
    let loaded = repo.load();
    only_error(&loaded, Code::WrongKindRoot, &["not under `stack/dev/`"]);
}
