//! Runs the simulator as a server, the way `proxops sim` does:
//! `cargo run -p proxops-pve-sim --example serve -- [LISTEN] [STATE_FILE] [TOKEN]`
//! (defaults: 127.0.0.1:8006, no state file, a fresh random token). Prints the URL, the
//! certificate fingerprint and the token, then serves until Ctrl-C.

use proxops_pve_sim::{ApiToken, SimConfig, User, start};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = SimConfig::default()
        .with_listen(
            args.first()
                .map_or("127.0.0.1:8006", String::as_str)
                .parse()?,
        )
        // A password login for ticket auth in manual tests.
        .with_users(vec![User {
            userid: "root@pam".into(),
            password: "secret".into(),
        }]);
    if let Some(path) = args.get(1).filter(|p| !p.is_empty()) {
        config = config.with_state_file(path)?;
    }
    if let Some(token) = args.get(2) {
        config.token = token.parse::<ApiToken>()?;
    }
    let sim = start(config).await?;
    println!("url: {}", sim.base_url());
    println!("fingerprint: {}", sim.fingerprint);
    println!("token: {}", sim.token);
    tokio::signal::ctrl_c().await?;
    sim.shutdown().await?;
    Ok(())
}
