//! Request authentication: the API-token header, or a ticket session (login at
//! `POST /access/ticket`, the `PVEAuthCookie` cookie, `CSRFPreventionToken` on writes, a fresh
//! login once the ticket reaches the renewal age).

use reqwest::Method;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

use crate::client::PveClient;
use crate::error::PveError;
use crate::params::Params;
use crate::secret::{Credentials, Secret};

pub(crate) enum Auth {
    Token(Secret),
    Ticket(TicketSession),
}

pub(crate) struct TicketSession {
    username: String,
    password: Secret,
    renew_after: Duration,
    current: Mutex<Option<Ticket>>,
}

#[derive(Clone)]
struct Ticket {
    ticket: Secret,
    csrf: Secret,
    obtained: Instant,
}

#[derive(serde::Deserialize)]
struct TicketAnswer {
    ticket: String,
    #[serde(rename = "CSRFPreventionToken")]
    csrf: String,
}

impl Auth {
    pub fn new(credentials: Credentials, renew_after: Duration) -> Auth {
        match credentials {
            Credentials::Token { id, secret } => {
                Auth::Token(Secret::new(format!("PVEAPIToken={id}={}", secret.expose())))
            }
            Credentials::Password { username, password } => Auth::Ticket(TicketSession {
                username,
                password,
                renew_after,
                current: Mutex::new(None),
            }),
        }
    }

    /// The headers for one request, logging in first when the session has no fresh ticket.
    pub async fn headers(
        &self,
        client: &PveClient,
        write: bool,
    ) -> Result<Vec<(&'static str, String)>, PveError> {
        match self {
            Auth::Token(header) => Ok(vec![("Authorization", header.expose().to_string())]),
            Auth::Ticket(session) => {
                let t = session.ticket(client).await?;
                let mut h = vec![("Cookie", format!("PVEAuthCookie={}", t.ticket.expose()))];
                if write {
                    h.push(("CSRFPreventionToken", t.csrf.expose().to_string()));
                }
                Ok(h)
            }
        }
    }

    /// Drops the ticket so the next request logs in again; false for token auth.
    pub async fn invalidate(&self) -> bool {
        match self {
            Auth::Token(_) => false,
            Auth::Ticket(session) => {
                *session.current.lock().await = None;
                true
            }
        }
    }
}

impl TicketSession {
    async fn ticket(&self, client: &PveClient) -> Result<Ticket, PveError> {
        // Held across the login so concurrent requests wait for one login instead of racing.
        let mut current = self.current.lock().await;
        if let Some(t) = current.as_ref()
            && t.obtained.elapsed() < self.renew_after
        {
            return Ok(t.clone());
        }
        let params = Params::new()
            .set("username", &self.username)
            .set("password", self.password.expose());
        let data = client
            .send(
                &Method::POST,
                "/access/ticket",
                "/access/ticket",
                &params,
                &[],
            )
            .await?;
        let answer: TicketAnswer = serde_json::from_value(data).map_err(|e| PveError::Decode {
            method: "POST".into(),
            path: "/access/ticket".into(),
            detail: e.to_string(),
        })?;
        let t = Ticket {
            ticket: Secret::new(answer.ticket),
            csrf: Secret::new(answer.csrf),
            obtained: Instant::now(),
        };
        *current = Some(t.clone());
        // The user only: ticket, CSRF token and password never reach a log line.
        tracing::debug!(user = %self.username, "logged in at /access/ticket");
        Ok(t)
    }
}
