//! nginx in front of a run's svc, with deploy/nginx.conf (`--nginx BINARY`): the subscribers
//! then connect to nginx, as a deployment's do.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NGINX_CONF: &str = include_str!("../../../../../deploy/nginx.conf");

pub(crate) struct Nginx {
    child: Child,
    pub(crate) addr: SocketAddr,
    /// Its configuration and logs, removed with it.
    _dir: tempfile::TempDir,
}

/// deploy/nginx.conf listening on `port`, both of its replicas `upstream`.
fn site(port: u16, upstream: SocketAddr) -> String {
    NGINX_CONF
        .replace("listen 8080;", &format!("listen 127.0.0.1:{port};"))
        .replace("server 127.0.0.1:8788 ", &format!("server {upstream} "))
        .replace("server 127.0.0.1:8789 ", &format!("server {upstream} "))
}

impl Nginx {
    /// Starts `binary` in front of `upstream` on a free loopback port, as Debian's nginx.conf
    /// runs it (a worker a core), with room for thousands of streams.
    pub(crate) fn start(binary: &str, upstream: SocketAddr) -> Nginx {
        let dir = tempfile::tempdir().expect("nginx's directory");
        {
            use std::os::unix::fs::PermissionsExt;
            // Run as root, nginx's workers drop to `nobody`, who must reach its files.
            let open = std::fs::Permissions::from_mode(0o755);
            std::fs::set_permissions(dir.path(), open).expect("nginx's directory opened");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let here = dir.path().display().to_string();
        std::fs::write(dir.path().join("svc.conf"), site(port, upstream)).expect("the site");
        let main = format!(
            "worker_processes auto;\nworker_rlimit_nofile 65536;\n\
             events {{ worker_connections 16384; }}\n\
             http {{\n    access_log off;\n    include {here}/svc.conf;\n}}\n"
        );
        std::fs::write(dir.path().join("nginx.conf"), main).expect("nginx.conf");
        let child = Command::new(binary)
            .args(["-p", &here, "-c", &format!("{here}/nginx.conf")])
            .args(["-e", &format!("{here}/error.log")])
            .args(["-g", &format!("daemon off; pid {here}/nginx.pid;")])
            .stdout(Stdio::null())
            .spawn()
            .expect("start nginx");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let started = Instant::now();
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "nginx did not listen: {}",
                std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        svc_testkit::terminate(&mut self.child, Duration::from_secs(5));
    }
}
