//! The demo's firewall drift: in a cluster whose repository declares a `Firewall`, a rule of one
//! of its security groups is changed by hand in PVE (its action flipped) and a rule is added by
//! hand beside it; the next cycle finds the changed rule, restores it, and leaves the hand rule
//! where it is.

use super::{Story, failed_run, observed_head};
use crate::demo::{DemoError, FirewallDrift};
use proxops_engine::backend::{Backend, connect};
use proxops_engine::plan::Verb;
use proxops_model::Spec;
use proxops_model::kinds::ObjectSpec;
use proxops_pve::{Method, Params, PveClient};
use serde_json::Value;

async fn rules(client: &PveClient, group: &str) -> Result<Vec<Value>, DemoError> {
    let path = format!("/cluster/firewall/groups/{group}");
    let data = client
        .call_json(
            Method::GET,
            "/cluster/firewall/groups/{group}",
            &path,
            &Params::new(),
        )
        .await
        .map_err(|e| DemoError::Simulator(e.to_string()))?;
    Ok(data.as_array().cloned().unwrap_or_default())
}

impl Story<'_> {
    /// The first cluster declaring a `Firewall` with a security group that has rules, and that
    /// group's name.
    pub(super) fn firewall_cluster(
        &self,
        names: &[String],
    ) -> Result<Option<(String, String, String)>, DemoError> {
        let head = self.head()?;
        for name in names {
            let Some(graph) = head.graph(name) else {
                continue;
            };
            for id in graph.resources() {
                let r = graph.resource(id);
                if let Spec::Object(ObjectSpec::Firewall(f)) = &r.spec
                    && let Some(g) = f.groups.iter().find(|g| !g.rules.is_empty())
                {
                    return Ok(Some((
                        name.clone(),
                        r.key().to_string(),
                        g.name.to_ascii_lowercase(),
                    )));
                }
            }
        }
        Ok(None)
    }

    /// Flips the action of the group's first rule of ours and adds a rule by hand; one cycle.
    pub(super) async fn firewall_drift(
        &self,
        cluster: &str,
        subject: &str,
        group: &str,
    ) -> Result<FirewallDrift, DemoError> {
        let head = self.head()?;
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
        let before = rules(&conn.client, group).await?;
        let Some(ours) = before.iter().find(|r| {
            r["comment"]
                .as_str()
                .is_some_and(|c| c.contains("[proxops."))
        }) else {
            return Err(DemoError::Repository(format!(
                "security group `{group}` has no rule of ProxOps's to change by hand"
            )));
        };
        let pos = ours["pos"].as_u64().unwrap_or(0);
        let action = ours["action"].as_str().unwrap_or("ACCEPT").to_owned();
        let flipped = if action == "DROP" { "ACCEPT" } else { "DROP" };
        let item = format!("/cluster/firewall/groups/{group}/{pos}");
        let path = format!("/cluster/firewall/groups/{group}");
        let written = async {
            conn.client
                .call_json(
                    Method::PUT,
                    "/cluster/firewall/groups/{group}/{pos}",
                    &item,
                    &Params::new().set("action", flipped),
                )
                .await?;
            conn.client
                .call_json(
                    Method::POST,
                    "/cluster/firewall/groups/{group}",
                    &path,
                    &Params::new()
                        .set("type", "in")
                        .set("action", "ACCEPT")
                        .set("macro", "Ping")
                        .set("enable", 1)
                        .set("comment", "added by hand")
                        .set("pos", 0),
                )
                .await
        }
        .await;
        let by_hand = vec![
            format!("rule {pos} of `{group}`: action {action} -> {flipped}"),
            format!("a Ping rule added by hand at the top of `{group}`"),
        ];
        if let Err(e) = written {
            if let Some(sim) = conn.sim {
                let _ = sim.shutdown().await;
            }
            return Err(DemoError::Simulator(e.to_string()));
        }
        if let Some(sim) = conn.sim {
            let _ = sim.shutdown().await;
        }
        self.note(&format!("by hand in PVE: {}", by_hand.join("; ")));
        let run = self.cycle(&head, cluster).await;
        failed_run(&run)?;
        let plan = run.cycles.first().map(|c| c.plan.clone());
        let found = plan.as_ref().is_some_and(|p| {
            p.actions.len() == 1
                && p.actions[0].verb == Verb::Update
                && format!("{}/{}", p.actions[0].kind, p.actions[0].name) == subject
                && p.actions[0].reason.contains("1 changed")
        });
        let conn = connect(&self.registry, found_cluster, &backend)
            .await
            .map_err(|e| DemoError::Simulator(e.to_string()))?;
        let after = rules(&conn.client, group).await;
        if let Some(sim) = conn.sim {
            let _ = sim.shutdown().await;
        }
        let after = after?;
        let hand_kept = after
            .first()
            .is_some_and(|r| r["comment"] == "added by hand");
        let restored = after
            .iter()
            .find(|r| r["comment"] == ours["comment"])
            .is_some_and(|r| r["action"] == action.as_str());
        Ok(FirewallDrift {
            cluster: cluster.to_owned(),
            subject: subject.to_owned(),
            group: group.to_owned(),
            by_hand,
            found,
            restored,
            hand_kept,
            plan,
            observed: observed_head(&run),
        })
    }
}
