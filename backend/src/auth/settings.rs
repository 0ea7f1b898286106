//! Auth configuration from the command line: sessions, cookies, trusted proxies and the
//! auth-proxy mode's group mapping.

use std::{net::IpAddr, time::Duration};

use ipnet::IpNet;
use shared::accounts::Role;

use crate::{error::CliError, password};

/// Auth configuration, from the command line.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub session_idle: Duration,
    pub session_absolute: Duration,
    /// Always mark the cookie `Secure` (it is anyway when a trusted proxy says the request came
    /// over https).
    pub secure_cookies: bool,
    pub trusted_proxies: Vec<IpNet>,
    /// `Some` when the trusted auth-proxy mode is on.
    pub proxy: Option<ProxySettings>,
    /// The key of auth-proxy callers' CSRF tokens ([`AuthSettings::proxy_csrf_token`]): the
    /// same on every replica (`--csrf-secret`, else one kept in the database), so any replica
    /// accepts a token another gave; random per process in tests.
    pub csrf_secret: String,
}

#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// `(group, role)`: members of the group hold the role.
    pub role_groups: Vec<(String, Role)>,
    /// Groups named `<prefix><team>` make their members members of that team.
    pub team_group_prefix: String,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            session_idle: Duration::from_secs(30 * 60),
            session_absolute: Duration::from_secs(12 * 3600),
            secure_cookies: false,
            trusted_proxies: Vec::new(),
            proxy: None,
            csrf_secret: password::random_hex(32),
        }
    }
}

impl AuthSettings {
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|net| net.contains(&ip))
    }

    /// An auth-proxy caller's CSRF token: a keyed hash of their user id, so no two users share
    /// one and every replica with the same secret derives the same. (Behind the proxy the
    /// console sees no session of its own; the proxy's own session guards the rest.)
    pub fn proxy_csrf_token(&self, user_id: i64) -> String {
        password::keyed_hash(
            self.csrf_secret.as_bytes(),
            format!("gpufleet proxy csrf: user {user_id}").as_bytes(),
        )
    }
}

/// Parses `10.0.0.0/8,127.0.0.1` into networks (a bare address is a /32 or /128).
pub fn parse_networks(list: &str) -> Result<Vec<IpNet>, CliError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| CliError::Input(format!("{s:?} is not an IP address or CIDR network")))
        })
        .collect()
}

/// Parses `admin=platform-admins,finance=finance` into `(group, role)` pairs.
pub fn parse_role_groups(list: &str) -> Result<Vec<(String, Role)>, CliError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (role, group) = pair
                .split_once('=')
                .ok_or_else(|| CliError::Input(format!("{pair:?} is not role=group")))?;
            let role = Role::parse(role.trim())
                .ok_or_else(|| CliError::Input(format!("{role:?} is not a role")))?;
            Ok((group.trim().to_owned(), role))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_lists_parse_or_explain() {
        let nets = parse_networks("10.0.0.0/8, 127.0.0.1,::1").expect("parses");
        assert_eq!(nets.len(), 3);
        assert!(nets[0].contains(&"10.1.2.3".parse::<IpAddr>().expect("ip")));
        assert!(nets[1].contains(&"127.0.0.1".parse::<IpAddr>().expect("ip")));
        assert!(!nets[1].contains(&"127.0.0.2".parse::<IpAddr>().expect("ip")));
        assert!(parse_networks("10.0.0.0/33").is_err());
        let groups = parse_role_groups("admin=ops, finance = money").expect("parses");
        assert_eq!(
            groups,
            vec![
                ("ops".to_owned(), Role::Admin),
                ("money".to_owned(), Role::Finance)
            ]
        );
        assert!(parse_role_groups("root=ops").is_err());
        assert!(parse_role_groups("admin").is_err());
    }
}
