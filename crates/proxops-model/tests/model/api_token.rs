//! `kind: ApiToken` (issue 32): its spec checked against `POST
//! /access/users/{userid}/token/{tokenid}`, its inferred reference to the `User` that declares
//! its `userid`, and its id unique per user.

use crate::support::{TempRepo, assert_valid, error_codes, only_error, resource};
use proxops_model::kinds::object::ObjectSpec;
use proxops_model::{Code, Registry, Spec};

fn token(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: ApiToken\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

const USER: &str =
    "apiVersion: proxops/v1alpha1\nkind: User\nmetadata:\n  name: ci\nspec:\n  userid: ci@pve\n";

/// A repository of cluster `c` with `files` (path, text) listed in its composition.
fn repo(files: &[(&str, String)]) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster("c", &["pve01"]);
    for (path, text) in files {
        repo.write(path, text);
    }
    let paths: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
    repo.compose("c", &paths);
    repo
}

#[test]
fn a_token_loads_with_its_pve_id_and_an_inferred_reference_to_its_user() {
    let repo = repo(&[
        ("user/c/ci.yaml", USER.to_owned()),
        (
            "apitoken/c/deploy.yaml",
            token(
                "deploy",
                "  userid: ci@pve\n  token: deploy\n  privsep: false\n  expire: 1900000000\n  comment: CI deploys\n",
            ),
        ),
    ]);
    let loaded = repo.load();
    assert_valid(&loaded);
    let cluster = loaded.cluster("c").unwrap();
    let r = resource(cluster, "ApiToken", "deploy");
    let Spec::Object(ObjectSpec::ApiToken(t)) = &r.spec else {
        panic!("{:?}", r.spec);
    };
    assert_eq!(t.full_tokenid(), "ci@pve!deploy");
    assert_eq!((t.privsep, t.expire), (Some(false), Some(1_900_000_000)));
    let registry = Registry::builtin();
    let kind = registry.get("ApiToken").unwrap();
    assert_eq!(kind.pve_id(&r.spec), Some("ci@pve!deploy"));
    let refs: Vec<String> = proxops_model::validate::references(&registry, r)
        .into_iter()
        .map(|x| format!("{}/{} ({})", x.target_kind, x.target_name, x.field))
        .collect();
    assert_eq!(refs, ["User/ci@pve (userid)"]);
}

#[test]
fn a_token_id_pve_refuses_is_reported_at_token() {
    for bad in ["9lives", "x", "has space", "a!b"] {
        let repo = repo(&[(
            "apitoken/c/t.yaml",
            token("t", &format!("  userid: ci@pve\n  token: \"{bad}\"\n")),
        )]);
        let loaded = repo.load();
        let d = only_error(&loaded, Code::InvalidValue, &["is not a valid `tokenid`"]);
        assert!(format!("{d:?}").contains("token"), "{bad}: {d:?}");
    }
}

#[test]
fn a_userid_without_a_realm_and_a_negative_expiry_are_refused() {
    let repo = repo(&[(
        "apitoken/c/t.yaml",
        token("t", "  userid: ci\n  token: deploy\n"),
    )]);
    let loaded = repo.load();
    only_error(&loaded, Code::InvalidValue, &["is not a valid `userid`"]);
    let repo = self::repo(&[(
        "apitoken/c/t.yaml",
        token("t", "  userid: ci@pve\n  token: deploy\n  expire: -1\n"),
    )]);
    assert!(!error_codes(&repo.load()).is_empty());
}

#[test]
fn a_secret_cannot_be_declared() {
    let repo = repo(&[(
        "apitoken/c/t.yaml",
        token("t", "  userid: ci@pve\n  token: deploy\n  value: s3cret\n"),
    )]);
    assert_eq!(error_codes(&repo.load()), [Code::UnknownField]);
}

#[test]
fn token_ids_are_unique_per_user_not_per_cluster() {
    let spec = |user: &str| format!("  userid: {user}\n  token: deploy\n");
    let ok = repo(&[
        ("apitoken/c/a.yaml", token("a", &spec("ci@pve"))),
        ("apitoken/c/b.yaml", token("b", &spec("backup@pve"))),
    ]);
    assert_valid(&ok.load());
    let clash = repo(&[
        ("apitoken/c/a.yaml", token("a", &spec("ci@pve"))),
        ("apitoken/c/b.yaml", token("b", &spec("ci@pve"))),
    ]);
    only_error(&clash.load(), Code::DuplicateResource, &["ci@pve!deploy"]);
}
