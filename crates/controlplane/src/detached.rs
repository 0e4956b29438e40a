//! The cluster of `nodestatus run`'s embedded default, left running beside
//! the engine and attached to again ([`EmbeddedApiserver::detach`]).

#[allow(unused_imports)]
use super::*;

/// The state file of a cluster that [`EmbeddedApiserver::detach`] left
/// running, in its directory.
pub const STATE_FILE: &str = "cluster.json";

/// What [`STATE_FILE`] holds.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Detached {
    server: String,
    secure_port: u16,
    etcd_url: String,
    admin_token: String,
    /// etcd, kube-apiserver, kube-controller-manager, in start order.
    pids: Vec<u32>,
}

pub(super) fn alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    i32::try_from(pid).is_ok_and(|p| p > 0 && unsafe { libc::kill(p, 0) } == 0)
}

/// The local cluster of `nodestatus run` (its embedded default) as it lives
/// beside the engine, like a real one: kube-apiserver with the node
/// lifecycle controller, which outlive the engine.
impl EmbeddedApiserver {
    /// The cluster that an earlier run left running in `dir`
    /// ([`EmbeddedApiserver::detach`]) when it is still up and knows node
    /// `node`; else (after stopping what is left of it) a new one with
    /// kube-controller-manager's node lifecycle controller at `grace`, each
    /// process in a session of its own, so that Ctrl-C on the engine's
    /// terminal does not reach them. The flag says whether it was attached.
    pub async fn start_or_attach(dir: &Path, node: &str, grace: Duration) -> Result<(Self, bool)> {
        if let Some(cluster) = Self::attach(dir, node).await {
            return Ok((cluster, true));
        }
        Self::stop_detached(dir)?;
        let cluster = Self::start_inner(
            dir,
            &[node],
            false,
            false,
            true,
            Extras {
                audit_log: false,
                node_lifecycle_grace: Some(grace),
                ..Default::default()
            },
            NodeParts::default(),
        )
        .await?;
        Ok((cluster, false))
    }

    async fn attach(dir: &Path, node: &str) -> Option<Self> {
        let text = std::fs::read_to_string(dir.join(STATE_FILE)).ok()?;
        let state: Detached = serde_json::from_str(&text).ok()?;
        let tokens = std::fs::read_to_string(dir.join("tokens.csv")).ok()?;
        let knows_node = tokens
            .lines()
            .any(|l| l.starts_with(&format!("{},", node_token(node))));
        if !knows_node || !state.pids.iter().all(|p| alive(*p)) {
            return None;
        }
        // A cluster started before it had a CA of its own is not attached
        // to (its certificate would not verify): it is stopped and started
        // anew.
        let ca_pem = std::fs::read_to_string(dir.join("certs").join(CA_FILE)).ok()?;
        let cluster = Self {
            dir: dir.to_owned(),
            die_with_parent: false,
            own_session: true,
            remove_dir: false,
            etcd: None,
            apiserver: None,
            controller_manager: None,
            scheduler: None,
            extras: Extras::default(),
            parts: NodeParts::default(),
            etcd_url: state.etcd_url,
            secure_port: state.secure_port,
            server: state.server,
            admin_token: state.admin_token,
            ca_pem,
        };
        let client = cluster.admin_client().ok()?;
        let req = http::Request::get("/readyz")
            .body(Vec::new())
            .expect("a valid request");
        let ready = tokio::time::timeout(Duration::from_secs(10), client.request_text(req)).await;
        matches!(ready, Ok(Ok(text)) if text.trim() == "ok").then_some(cluster)
    }

    /// Leaves the cluster's processes running when this is dropped, and
    /// writes [`STATE_FILE`], by which [`EmbeddedApiserver::start_or_attach`]
    /// finds them again and [`EmbeddedApiserver::stop_detached`] stops them.
    pub fn detach(&mut self) -> Result<()> {
        let children = [
            &mut self.etcd,
            &mut self.apiserver,
            &mut self.controller_manager,
        ];
        let pids: Vec<u32> = children
            .iter()
            .filter_map(|c| c.as_ref().map(Child::id))
            .collect();
        if pids.is_empty() {
            return Ok(()); // attached: the state file is there
        }
        let state = Detached {
            server: self.server.clone(),
            secure_port: self.secure_port,
            etcd_url: self.etcd_url.clone(),
            admin_token: self.admin_token.clone(),
            pids,
        };
        let path = self.dir.join(STATE_FILE);
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(&state).expect("plain data"),
        )
        .map_err(io(format!("writing {}", path.display())))?;
        for c in children {
            c.take();
        }
        self.remove_dir = false;
        Ok(())
    }

    /// Stops the processes of a cluster left running in `dir` (SIGTERM, then
    /// SIGKILL after 10 s) and removes its [`STATE_FILE`]. Whether there was
    /// one running.
    pub fn stop_detached(dir: &Path) -> Result<bool> {
        let path = dir.join(STATE_FILE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(false);
        };
        let pids = serde_json::from_str::<Detached>(&text)
            .map(|s| s.pids)
            .unwrap_or_default();
        let running: Vec<u32> = pids.into_iter().rev().filter(|p| alive(*p)).collect();
        for sig in [libc::SIGTERM, libc::SIGKILL] {
            for p in &running {
                // SAFETY: kill(2) on a pid that this state file recorded.
                unsafe { libc::kill(*p as i32, sig) };
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while running.iter().any(|p| alive(*p)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            if !running.iter().any(|p| alive(*p)) {
                break;
            }
        }
        std::fs::remove_file(&path).map_err(io(format!("removing {}", path.display())))?;
        Ok(!running.is_empty())
    }
}
