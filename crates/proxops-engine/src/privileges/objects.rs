//! What the cluster objects' requests need: read from PVE's own permission checks in the schema
//! table (`proxops_pve_schema::required`), resolved with each request's path and parameters,
//! rather than written out again here.

use super::{Grant, Need};
use proxops_pve_schema::{Requirement, Term, required};

/// The need of one request (`method` on the concrete `path` of `template`, with `params`);
/// `None` when the table does not know the endpoint or any user may send it.
pub(super) fn request_need(
    purpose: &str,
    method: &str,
    template: &str,
    path: &str,
    params: &[(String, String)],
) -> Option<Need> {
    let vars = |name: &str| -> Option<String> {
        if let Some((_, v)) = params.iter().find(|(k, _)| k == name) {
            return Some(v.clone());
        }
        path_var(template, path, name)
    };
    let detail = format!("{method} {template}");
    match required(method, template, None, &vars)? {
        Requirement::World | Requirement::AnyUser => None,
        Requirement::RootOnly => Some(
            Need::root_only(purpose, format!("{detail}: only root@pam may send it")).at(detail),
        ),
        Requirement::AnyOf(alternatives) => {
            let any_of: Vec<Vec<Grant>> = alternatives
                .iter()
                .filter_map(|alt| {
                    alt.iter()
                        .map(|t| match t {
                            Term::Grant { path, privilege } => Some(super::grant(path, privilege)),
                            // Held on `/access/groups` it covers every group the user is in.
                            Term::GroupOfUser { privilege, .. } => {
                                Some(super::grant("/access/groups", privilege))
                            }
                            // A token is never the user a request is about.
                            Term::IsUser(_) => None,
                        })
                        .collect::<Option<Vec<Grant>>>()
                })
                .collect();
            // Two checks can come to the same grants (`userid-group` read as the privilege on
            // `/access/groups`): each alternative once.
            let mut any_of = any_of;
            any_of.dedup();
            if any_of.is_empty() {
                return Some(
                    Need::root_only(
                        purpose,
                        format!(
                            "{detail}: no privilege allows it with these parameters, only root@pam"
                        ),
                    )
                    .at(detail),
                );
            }
            let mut need = Need::one(purpose, "/", "").at(detail);
            need.any_of = any_of;
            Some(need)
        }
    }
}

/// The value of placeholder `{name}` of `template` in the concrete `path` (percent-decoded
/// enough for ids: `%40` and friends are left as they are, since ids rarely need them).
fn path_var(template: &str, path: &str, name: &str) -> Option<String> {
    let want = format!("{{{name}}}");
    let t: Vec<&str> = template.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    let at = t.iter().position(|s| *s == want)?;
    // The last placeholder takes the rest (an IP set entry's CIDR keeps its `/`).
    if at + 1 == t.len() {
        return Some(p.get(at..)?.join("/"));
    }
    p.get(at).map(|s| (*s).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_create_needs_pool_allocate_on_the_pool_it_names() {
        let params = vec![("poolid".to_owned(), "prod".to_owned())];
        let need = request_need("create Pool/prod", "POST", "/pools", "/pools", &params).unwrap();
        assert_eq!(need.requirement(), "Pool.Allocate on /pool/prod");
    }

    #[test]
    fn path_variables_come_from_the_concrete_path() {
        let need = request_need("delete", "DELETE", "/pools/{poolid}", "/pools/prod", &[]).unwrap();
        assert_eq!(need.requirement(), "Pool.Allocate on /pool/prod");
        assert_eq!(
            path_var(
                "/cluster/firewall/ipset/{name}/{cidr}",
                "/cluster/firewall/ipset/web/10.0.0.0/8",
                "cidr"
            )
            .as_deref(),
            Some("10.0.0.0/8")
        );
    }
}
